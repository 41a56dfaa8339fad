#!/usr/bin/env -S node --max-semi-space-size=2
// The installed `reef` command: registers tsx so the TypeScript sources run as they are.
// --max-semi-space-size=2 (MiB; package.json's start and reef scripts pass the same): V8 frees
// young ArrayBuffers — every upload body is a few — at its cheap young-generation collections, but
// with the default 16 MiB young generation those come seldom, the bodies' bytes reach V8's
// external-memory limit (64 MiB) first, and V8 then runs full mark-compact collections instead:
// 24 per 3,000,000 uploaded observations, against 1 with this flag, and about a fifth of the
// server's CPU per observation (docs/performance.md, "V8's young generation capped at 2 MiB").
// Reads cost the same either way.
import { register } from 'tsx/esm/api';
register();
await import('../src/main.ts');
