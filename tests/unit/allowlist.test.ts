/** The executable allowlist, against a scratch directory of real files and symlinks. */
import { chmodSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { allowlistProblems, checkAllowed, globToRegExp, resolveExecutable } from '../../worker/allowlist.js';

let root: string; // realpath of the scratch directory
let linked: string; // a symlink to root

beforeAll(() => {
  root = realpathSync(mkdtempSync(path.join(tmpdir(), 'skipjack-allow-')));
  for (const dir of ['bin', 'opt/tools/v1/bin', 'evil']) mkdirSync(path.join(root, dir), { recursive: true });
  for (const file of ['bin/deploy', 'bin/curl', 'opt/tools/v1/bin/build', 'evil/payload']) {
    writeFileSync(path.join(root, file), '#!/bin/sh\n');
    chmodSync(path.join(root, file), 0o755);
  }
  writeFileSync(path.join(root, 'bin/readme'), 'not a program');
  symlinkSync(path.join(root, 'evil/payload'), path.join(root, 'bin/innocent'));
  linked = `${root}-link`;
  symlinkSync(root, linked);
});

afterAll(() => {
  rmSync(linked, { force: true });
  rmSync(root, { recursive: true, force: true });
});

describe('checkAllowed', () => {
  const cases: Array<[string, string[], string[], RegExp | null]> = [
    ['no patterns means no allowlist', ['anything-at-all'], [], null],
    ['an exact path', ['{root}/bin/deploy'], ['{root}/bin/deploy'], null],
    ['a bare name resolved on PATH', ['deploy'], ['{root}/bin/deploy'], null],
    ['* within one segment', ['{root}/bin/curl'], ['{root}/bin/*'], null],
    [
      '* does not cross segments',
      ['{root}/opt/tools/v1/bin/build'],
      ['{root}/opt/*/bin/build'],
      /not in the worker's allowlist/,
    ],
    ['** crosses segments', ['{root}/opt/tools/v1/bin/build'], ['{root}/opt/**'], null],
    ['/**/ matches zero segments too', ['{root}/bin/curl'], ['{root}/**/bin/curl'], null],
    ['? is one character', ['{root}/bin/curl'], ['{root}/bin/cur?'], null],
    [
      'a path outside every pattern',
      ['curl'],
      ['{root}/bin/deploy', '/usr/bin/true'],
      /executable \{root\}\/bin\/curl \(from "curl"\) is not in the worker's allowlist \(\{root\}\/bin\/deploy, \/usr\/bin\/true\)/,
    ],
    [
      'a symlink is judged by its target',
      ['{root}/bin/innocent'],
      ['{root}/bin/*'],
      /executable \{root\}\/evil\/payload \(from "\{root\}\/bin\/innocent"\) is not in/,
    ],
    ['a pattern through a linked directory still matches', ['{root}/bin/deploy'], ['{linked}/bin/*'], null],
    ['.. cannot climb out of a pattern', ['{root}/bin/../evil/payload'], ['{root}/bin/*'], /evil\/payload .*is not in/],
    ['a relative pattern matches nothing', ['{root}/bin/deploy'], ['bin/deploy'], /is not in/],
    [
      'an unknown command',
      ['skipjack-no-such-tool'],
      ['{root}/bin/*'],
      /executable skipjack-no-such-tool was not found on PATH/,
    ],
    ['a file that is not executable', ['{root}/bin/readme'], ['{root}/bin/*'], /was not found or is not executable/],
    ['an empty command', [], ['{root}/bin/*'], /command is empty/],
  ];

  test.each(cases)('%s', (_name, command, patterns, expected) => {
    const fill = (s: string) => s.replaceAll('{root}', root).replaceAll('{linked}', linked);
    const escapedRoot = root.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    const reason = checkAllowed(command.map(fill), patterns.map(fill), { pathEnv: `/nonexistent:${root}/bin` });
    if (expected === null) expect(reason).toBeNull();
    else expect(reason).toMatch(new RegExp(expected.source.replaceAll('\\{root\\}', escapedRoot)));
  });

  test('a relative command is resolved against the job cwd', () => {
    expect(checkAllowed(['./deploy'], [`${root}/bin/deploy`], { cwd: path.join(root, 'bin') })).toBeNull();
    expect(checkAllowed(['./deploy'], [`${root}/bin/deploy`], { cwd: root })).toMatch(/not found/);
  });

  test('system paths resolve through links such as /bin -> /usr/bin', () => {
    const realTrue = resolveExecutable('true', { pathEnv: '/bin:/usr/bin' })!;
    expect(checkAllowed(['true'], ['/bin/true', '/usr/bin/true'], { pathEnv: '/bin:/usr/bin' })).toBeNull();
    expect(checkAllowed(['true'], [realTrue])).toBeNull();
  });
});

describe('helpers', () => {
  test.each([
    ['/usr/bin/*', '/usr/bin/env', true],
    ['/usr/bin/*', '/usr/bin/x/env', false],
    ['/usr/**', '/usr/bin/x/env', true],
    ['/usr/**/env', '/usr/env', true],
    ['/usr/bin/e.v', '/usr/bin/env', false],
    ['/opt/a+b/*', '/opt/a+b/run', true],
  ])('glob %s against %s is %p', (glob, file, matches) => {
    expect(globToRegExp(glob).test(file)).toBe(matches);
  });

  test('allowlistProblems flags relative patterns', () => {
    expect(allowlistProblems(['/usr/bin/*', 'bin/*'])).toEqual(['allowlist pattern "bin/*" is not an absolute path']);
  });
});
