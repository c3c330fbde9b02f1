import type { CliIo } from './io.js';

/** One run of the program: its streams and environment, and the exit code an action asked for. */
export interface CliRun {
  readonly io: CliIo;
  exitCode: number;
}

/**
 * An action: the run's io, then what commander passes (the arguments, the options, the command).
 * It may answer an exit code (verify: 1 for a signature that does not match); a refusal throws.
 */
// Commander passes arguments untyped (its own action type is `(...args: any[]) => void`); each
// action declares what its command defines, as it did when it was inline.
export type Action = (io: CliIo, ...args: never[]) => Promise<number | void> | number | void;

/**
 * A command's action, imported only when that command runs: `--help`, `--version` and every other
 * command never load its dependencies (zod, pg, pino, fastify...), which is most of a start-up.
 * The module and the export name are checked by the compiler.
 */
export function lazy<M extends { [P in K]: Action }, K extends keyof M & string>(
  run: CliRun,
  load: () => Promise<M>,
  name: K,
): (...args: unknown[]) => Promise<void> {
  return async (...args) => {
    const action = (await load())[name];
    const code = await action(run.io, ...(args as never[]));
    if (typeof code === 'number') run.exitCode = code;
  };
}
