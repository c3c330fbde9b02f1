import type { Command } from 'commander';
import { ALERT_ACTIONS } from '../../admin/alert-actions.js';
import { lazy, type CliRun } from '../lazy.js';
import { ALERTS_LIST_DEFAULT, ALERTS_TAIL_DEFAULT, collect } from '../options.js';
import { ROLES } from '../../roles.js';

const actions = () => import('../actions/admin.js');

export function registerJobs(program: Command, run: CliRun): void {
  const jobs = program.command('jobs').description('inspect and act on jobs');
  jobs
    .command('list')
    .description('list jobs, newest first: a table on a terminal, JSON lines otherwise')
    .option('--status <status>', 'pending|running|completed|dead|cancelled')
    .option('--type <type>', 'job type, e.g. webhook.deliver')
    .option('--topic <topic>', 'event topic')
    .option('--endpoint <name>', 'endpoint name')
    .option('--event-id <uuid>', 'event id')
    .option('--limit <n>', 'at most this many', '50')
    .option('--json', 'JSON lines even on a terminal (they are the output whenever stdout is not one)')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'jobsList'));
  jobs
    .command('show')
    .description('one job with its delivery attempts')
    .argument('<id>', 'job id')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'jobsShow'));
  jobs
    .command('retry')
    .description('send a dead, completed or cancelled job again (a new attempt series)')
    .argument('<id>', 'job id')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'jobsRetry'));
  jobs
    .command('cancel')
    .description('cancel a pending job')
    .argument('<id>', 'job id')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'jobsCancel'));
  jobs
    .command('redrive')
    .description(
      're-queue dead jobs matching the filter; prints {"count": N} (--dry-run: how many match, with "dry_run": true; on a terminal, a sentence)',
    )
    .option('--status <status>', 'only "dead", the default')
    .option('--since <duration>', 'only jobs that went dead within this long, e.g. 1h')
    .option('--topic <topic>', 'event topic')
    .option('--endpoint <name>', 'endpoint name')
    .option('--dry-run', 'count only; change nothing')
    .option('--json', 'the JSON line even on a terminal')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'jobsRedrive'));
  jobs
    .command('blocked')
    .description('ordering keys held behind their dead head (strict endpoints), the longest blocked first: JSON lines')
    .option('--endpoint <name>', 'endpoint name')
    .option('--limit <n>', 'at most this many', '100')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'jobsBlocked'));
  jobs
    .command('retry-head')
    .description("send a blocked key's dead head again, first; the key goes on once it is delivered")
    .argument('<endpoint>', 'endpoint name')
    .argument('<key>', 'the ordering key')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'jobsRetryHead'));
  jobs
    .command('skip-head')
    .description("leave a blocked key's dead head dead (or a head deleted by hand gone) and let the key's next event go")
    .argument('<endpoint>', 'endpoint name')
    .argument('<key>', 'the ordering key')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'jobsSkipHead'));
}

export function registerUsers(program: Command, run: CliRun): void {
  const users = program.command('users').description('API users and their tokens');
  users
    .command('add')
    .description('create a user; prints its token once (only a hash is stored)')
    .argument('<name>', 'user name')
    .requiredOption('--role <role>', `${ROLES.slice(0, -1).join(', ')} or ${ROLES.at(-1)}`)
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'usersAdd'));
  users
    .command('list')
    .description('list users (never tokens): a table on a terminal, JSON lines otherwise')
    .option('--json', 'JSON lines even on a terminal (they are the output whenever stdout is not one)')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'usersList'));
  users
    .command('revoke')
    .description('revoke a user: its token is refused at once')
    .argument('<name>', 'user name')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'usersRevoke'));
}

export function registerAlerts(program: Command, run: CliRun): void {
  program
    .command('alerts')
    .description(
      'alerts, the newest ones, or --follow to print the last 10 and keep listening (like tail -f): a table on a terminal ("no alerts" when there are none), JSON lines otherwise',
    )
    .option('--follow', 'print the last alerts (10, or --limit), then each new one as it happens, until interrupted')
    .option('--since <id>', 'start after this alert id instead (replays every alert after it, with or without --follow)')
    .option(
      '--limit <n>',
      `how many past alerts: without --follow the newest ${ALERTS_LIST_DEFAULT} (or the first after --since; max 1000), with --follow the last ${ALERTS_TAIL_DEFAULT}`,
    )
    .option(
      '--action <action>',
      `only these alerts, listed and followed; repeat it or separate with commas (${ALERT_ACTIONS.join(', ')})`,
      collect,
    )
    .option('--state <state>', 'only alerts open (their condition lasts, or nobody acknowledged them) or resolved')
    .option('--ack <id>', 'acknowledge this alert and print it (it resolves too, unless its condition still lasts)')
    .option('--ack-all', 'acknowledge every alert up to the newest now (of --action, if given) and print how many')
    .option('--json', 'JSON lines even on a terminal (they are the output whenever stdout is not one)')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'alerts'));
}
