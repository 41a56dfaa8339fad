// Entry point of the `reef` command (bin/reef.js, npm start): hands argv to the CLI dispatcher.
import { main } from './cli/index.ts';

process.exitCode = await main(process.argv.slice(2));
