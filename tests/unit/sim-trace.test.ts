// Trace files: CSV and JSONL give the same jobs, and a trace runs through every model.
import { MODELS, simulate } from '../../sim/simulate.js';
import { parseTrace } from '../../sim/trace.js';
import { workloadSchema } from '../../sim/workload.js';

const csv = `arrival,runSeconds,class,queue,priority,cpu,memoryMb,region,labels
0.5,2,build,default,0,1000,512,mad|ord,
0.1,1,train,default,5,2000,,mad,gpu=a100
`;
const jsonl = [
  { arrival: 0.5, runSeconds: 2, class: 'build', cpu: 1000, memoryMb: 512, region: ['mad', 'ord'] },
  { arrival: 0.1, runSeconds: 1, class: 'train', priority: 5, cpu: 2000, region: 'mad', labels: { gpu: 'a100' } },
]
  .map((r) => JSON.stringify(r))
  .join('\n');

test('CSV and JSONL traces parse to the same jobs, sorted by arrival', () => {
  const a = parseTrace(csv, 't.csv');
  expect(a).toEqual(parseTrace(jsonl, 't.jsonl'));
  expect(a[0]).toEqual({
    arrival: 0.1,
    runSeconds: 1,
    className: 'train',
    queue: 'default',
    priority: 5,
    constraints: { region: 'mad', labels: { gpu: 'a100' }, resources: { cpu: 2000 } },
  });
  expect(() => parseTrace('arrival,runSeconds\nx,1\n', 'bad.csv')).toThrow(/bad.csv:2: arrival/);
});

test.each(MODELS)('%s replays a trace: each job runs where its constraints allow', (model) => {
  const w = workloadSchema.parse({
    trace: 't.csv',
    workers: [
      { count: 1, region: 'mad', labels: { gpu: 'a100' } },
      { count: 1, region: 'ord' },
    ],
  });
  const r = simulate(w, model, { trace: parseTrace(csv) });
  expect(r.completed).toBe(2);
  expect(r.violations).toEqual({ constraint: 0, capacity: 0 });
  expect(Object.keys(r.waitByClass)).toEqual(['build', 'train']);
});
