import type { Command } from 'commander';
import { configPath, configWarnings } from '../../config/index.js';
import { readConfig, type GlobalOptions } from '../context.js';

export function registerConfig(program: Command): void {
  const config = program.command('config').description('configuration commands');
  config
    .command('check')
    .description('validate the configuration; exit 0 when valid, 2 with every problem named by its key')
    .option('-c, --config <file>', 'config file (default: $ACW_CONFIG, ./config.yaml, built-in defaults)')
    .action((opts: GlobalOptions) => {
      const cfg = readConfig(opts);
      // Valid, so exit 0, but said on stderr.
      for (const w of configWarnings(cfg)) process.stderr.write(`warning: ${w}\n`);
      const path = opts.config ?? configPath();
      process.stdout.write(`ok: ${path ?? 'built-in defaults'}\n`);
    });
}
