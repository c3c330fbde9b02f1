#!/usr/bin/env node
import { main } from '../dist/cli/main.js';

const code = await main(process.argv.slice(2));
// Long-running commands (serve, worker, receive) resolve only after their shutdown.
process.exit(code);
