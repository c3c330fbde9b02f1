import { migrate as applyMigrations } from '../../db/migrate.js';
import { readConfig } from '../config.js';
import { withDatabase } from '../database.js';
import type { GlobalOptions } from '../exit.js';
import type { CliIo } from '../io.js';

export async function migrate(io: CliIo, opts: GlobalOptions): Promise<void> {
  const config = readConfig(io, opts, { needSecrets: false });
  await withDatabase(io, config, async (db, log) => {
    const { applied } = await applyMigrations(db.pool, { schema: config.database.schema, log });
    io.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'up to date\n');
  });
}
