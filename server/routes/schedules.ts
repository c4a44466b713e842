// Schedules: POST /schedules adds or replaces one, GET lists them, DELETE removes one. The jobs
// their ticks enqueue are ordinary jobs (routes/jobs.ts shows them).
import { Router } from 'express';
import { createScheduleSchema, scheduleParamSchema } from '../../protocol/schedules.js';
import type { AppContext } from '../context.js';
import { deleteSchedule, listSchedules, upsertSchedule } from '../store/schedules.js';
import { parse } from '../validate.js';

export function scheduleRoutes(ctx: AppContext): Router {
  const r = Router();

  r.post('/schedules', async (req, res) => {
    const s = parse(createScheduleSchema, req.body, 'body');
    const { view, created } = await upsertSchedule(ctx.db, s);
    ctx.log.info({ schedule: s.name, cron: s.cron, timeZone: s.timeZone, created }, 'schedule saved');
    ctx.pokeSchedules();
    res.status(created ? 201 : 200).json(view);
  });

  r.get('/schedules', async (_req, res) => {
    res.json({ schedules: await listSchedules(ctx.db) });
  });

  r.delete('/schedules/:name', async (req, res) => {
    const { name } = parse(scheduleParamSchema, req.params, 'params');
    await deleteSchedule(ctx.db, name);
    ctx.log.info({ schedule: name }, 'schedule removed');
    res.status(204).end();
  });

  return r;
}
