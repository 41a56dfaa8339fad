import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { storeConformance } from './conformance.ts';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'reef-sqlite-'));

storeConformance('sqlite', {
  async open() {
    const s = new SqliteStore({ file: path.join(dir, 'reef.db') });
    await s.migrate();
    return s;
  },
  async cleanup() {
    fs.rmSync(dir, { recursive: true, force: true });
  },
});
