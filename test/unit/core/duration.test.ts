// The one duration module (src/core/duration.ts): what the API, simulations, kit settings and CLI
// accept, and how the CLI prints durations back.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatDuration, parseDuration } from '../../../src/core/duration.ts';

test('parses every unit, fractions and a bare number in the caller’s unit', () => {
  assert.equal(parseDuration('500ms'), 500);
  assert.equal(parseDuration('10s'), 10_000);
  assert.equal(parseDuration('1.5m'), 90_000);
  assert.equal(parseDuration(' 2h '), 7_200_000);
  assert.equal(parseDuration('7d'), 604_800_000);
  assert.equal(parseDuration('250'), 250);
  assert.equal(parseDuration('60', 's'), 60_000);
  assert.equal(parseDuration('0', 's'), 0);
});

test('anything else is not a duration', () => {
  for (const s of ['', 'soon', '10 minutes', '-5s', '1e3', '5w', 's', '1.s', '0x10']) assert.ok(Number.isNaN(parseDuration(s)), s);
});

test('formats in at most two units, carrying rounded parts over', () => {
  assert.equal(formatDuration(750), '750ms');
  assert.equal(formatDuration(4_200), '4.2s');
  assert.equal(formatDuration(10_000), '10s');
  assert.equal(formatDuration(330_000), '5m 30s');
  assert.equal(formatDuration(60_000), '1m');
  assert.equal(formatDuration(119_700), '2m');
  assert.equal(formatDuration(7_500_000), '2h 5m');
  assert.equal(formatDuration(86_400_000 + 4 * 3_600_000), '1d 4h');
  assert.equal(formatDuration(Number.POSITIVE_INFINITY), '?');
});

test('what it prints, it parses back (whole units)', () => {
  for (const ms of [1, 999, 1000, 59_000, 60_000, 3_600_000, 86_400_000]) assert.equal(parseDuration(formatDuration(ms)), ms);
});
