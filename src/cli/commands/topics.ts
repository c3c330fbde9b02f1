import type { Command } from 'commander';
import { lazy, type CliRun } from '../lazy.js';

const actions = () => import('../actions/topics.js');

/** `topics list|show|add|archive|types`: the topic catalog from the shell (docs/operations.md#topic-catalog), audited as `cli:USER`. */
export function registerTopics(program: Command, run: CliRun): void {
  const topics = program.command('topics').description('the topic catalog: schemas, examples, versions; TypeScript types for producers');
  topics
    .command('list')
    .description('each topic: latest schema version, validation mode, deprecated, archived; a table on a terminal, JSON lines otherwise')
    .option('--json', 'JSON lines even on a terminal')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'topicsList'));
  topics
    .command('show')
    .description('one topic with every schema version and its examples (JSON)')
    .argument('<name>', 'topic name')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'topicsShow'));
  topics
    .command('add')
    .description('declare a topic (live in every process within a second); or, with --new-version, add a schema version to one')
    .argument('<name>', 'topic name, lowercase dot-separated words')
    .requiredOption('--schema <json>', 'JSON Schema (draft 2020-12) of its data: JSON text, @file, or @- for standard input')
    .option('--example <json>', 'an example of its data, matching the schema: JSON text or @file (repeatable; at least one)', collect)
    .option('--description <text>', 'what the event means')
    .option('--validation <mode>', "this topic's mode: off, warn or enforce (default: topics.validation)")
    .option('--new-version', 'the topic exists: add this schema as its next version')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'topicsAdd'));
  topics
    .command('archive')
    .description(
      'archive a topic: no longer offered (refused under topics.require_declared), its versions kept for the events that refer to them',
    )
    .argument('<name>', 'topic name')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'topicsArchive'));
  topics
    .command('types')
    .description('print a TypeScript declaration: a `Topics` map from each topic to the type of its data (for the typed client and notify)')
    .option('-c, --config <file>', 'config file')
    .action(lazy(run, actions, 'topicsTypes'));
}

function collect(v: string, prev: string[] = []): string[] {
  return [...prev, v];
}
