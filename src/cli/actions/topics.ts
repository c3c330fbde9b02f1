import { VALIDATION_MODES } from '../../config/index.js';
import { channels } from '../../db/sql.js';
import { fromZod } from '../../http/errors.js';
import { addVersionInput, createTopicInput } from '../../topics/input.js';
import { latest, readTopic, readTopics } from '../../topics/rows.js';
import { addTopicVersion, createTopic, updateTopic, type TopicStoreContext } from '../../topics/store.js';
import { topicView } from '../../topics/view.js';
import { ApiError } from '../../errors.js';
import { readConfig } from '../config.js';
import { withDatabase } from '../database.js';
import { EXIT, ExitError, type GlobalOptions } from '../exit.js';
import { printJson, readArg, type CliIo } from '../io.js';
import { forPeople, printTable, type JsonOption } from '../table.js';
import { actor } from './admin.js';

/**
 * The topic catalog from the shell: the same reads and writes as /v1/topics (src/topics/), audited
 * as the OS user. The endpoints of a view are the config file's (stored ones are listed by the API).
 */
export async function topicsList(io: CliIo, o: GlobalOptions & JsonOption): Promise<void> {
  const config = readConfig(io, o, { needSecrets: false });
  await withDatabase(io, config, async (db) => {
    const list = (await readTopics(db.pool)).map((t) => topicView(t, config.topics.validation, []));
    if (forPeople(io, o))
      printTable(
        io,
        ['TOPIC', 'VERSION', 'VALIDATION', 'SOURCE', 'DEPRECATED', 'ARCHIVED', 'DESCRIPTION'],
        list.map((t) => [t.name, t.version, t.effective_validation, t.source, t.deprecated, t.archived, t.description]),
        'no topics',
      );
    else for (const t of list) if (!printJson(io, { ...t, versions: t.versions.map((v) => v.version) })) break;
  });
}

export async function topicsShow(io: CliIo, name: string, o: GlobalOptions): Promise<void> {
  const config = readConfig(io, o, { needSecrets: false });
  await withDatabase(io, config, async (db) => {
    const t = await readTopic(db.pool, name);
    if (!t) throw new ApiError(404, 'not_found', `name: no topic ${name}`, { field: 'name' });
    printJson(io, topicView(t, config.topics.validation, []));
  });
}

async function jsonArg(io: CliIo, flag: string, value: string): Promise<unknown> {
  try {
    return JSON.parse(await readArg(io, value));
  } catch (err) {
    throw new ExitError(EXIT.usage, `${flag}: not valid JSON: ${(err as Error).message}`);
  }
}

interface AddOptions extends GlobalOptions {
  schema: string;
  example?: string[];
  description?: string;
  validation?: string;
  newVersion?: boolean;
}

export async function topicsAdd(io: CliIo, name: string, o: AddOptions): Promise<void> {
  if (o.validation !== undefined && !(VALIDATION_MODES as readonly string[]).includes(o.validation))
    throw new ExitError(EXIT.usage, `--validation: expected off, warn or enforce, got ${JSON.stringify(o.validation)}`);
  const schema = await jsonArg(io, '--schema', o.schema);
  const examples: unknown[] = [];
  for (const e of o.example ?? []) examples.push(await jsonArg(io, '--example', e));
  const raw = o.newVersion
    ? { schema, examples }
    : {
        name,
        schema,
        examples,
        ...(o.description !== undefined ? { description: o.description } : {}),
        ...(o.validation !== undefined ? { validation: o.validation } : {}),
      };
  const parsed = (o.newVersion ? addVersionInput : createTopicInput).safeParse(raw);
  if (!parsed.success) throw fromZod(parsed.error, 'body');
  const config = readConfig(io, o, { needSecrets: false });
  await withDatabase(io, config, async (db) => {
    const ctx: TopicStoreContext = { pool: db.pool, channel: channels(config.database.schema).topics };
    const t = o.newVersion
      ? await addTopicVersion(ctx, name, { schema: parsed.data.schema, examples: parsed.data.examples }, actor(io))
      : await createTopic(ctx, createTopicInput.parse(raw), actor(io));
    printJson(io, topicView(t, config.topics.validation, []));
  });
}

export async function topicsArchive(io: CliIo, name: string, o: GlobalOptions): Promise<void> {
  const config = readConfig(io, o, { needSecrets: false });
  await withDatabase(io, config, async (db) => {
    const ctx: TopicStoreContext = { pool: db.pool, channel: channels(config.database.schema).topics };
    printJson(io, topicView(await updateTopic(ctx, name, { archived: true }, actor(io)), config.topics.validation, []));
  });
}

/** The declaration for producers: the generator is loaded by this command only. */
export async function topicsTypes(io: CliIo, o: GlobalOptions): Promise<void> {
  const config = readConfig(io, o, { needSecrets: false });
  const { topicsDeclaration } = await import('../../topics/typegen.js');
  await withDatabase(io, config, async (db) => {
    const topics = (await readTopics(db.pool)).filter((t) => !t.archived);
    io.stdout.write(
      topicsDeclaration(
        topics.flatMap((t) =>
          latest(t) ? [{ name: t.name, description: t.description, version: latest(t)!.version, schema: latest(t)!.schema }] : [],
        ),
      ),
    );
  });
}
