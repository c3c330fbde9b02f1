#!/usr/bin/env node
import module from 'node:module';

// On Node 22 and later, V8 keeps the compiled code of our modules and our dependencies' on disk
// (in the OS temp directory), so every command after the first starts faster. Node 20 has no
// such cache: this is then a no-op. Set before the CLI is imported, which the import below waits for.
module.enableCompileCache?.();
const { main } = await import('../dist/cli/main.js');

const code = await main(process.argv.slice(2));
// Long-running commands (serve, worker, receive) resolve only after their shutdown.
process.exit(code);
