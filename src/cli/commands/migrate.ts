import type { Command } from 'commander';
import { migrate } from '../../db/migrate.js';
import { readConfig, withDatabase, type GlobalOptions } from '../context.js';

export function registerMigrate(program: Command): void {
  program
    .command('migrate')
    .description('apply pending migrations once (safe to run concurrently); refuses a database newer than this code')
    .option('-c, --config <file>', 'config file')
    .action(async (opts: GlobalOptions) => {
      const config = readConfig(opts, { needSecrets: false });
      await withDatabase(config, async (db, log) => {
        const { applied } = await migrate(db.pool, { schema: config.database.schema, log });
        process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'up to date\n');
      });
    });
}
