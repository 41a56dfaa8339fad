// Value rules every entry point shares: timestamps (both the canonical fast path and the general
// one), coordinates, temperatures, names.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isReefError } from '../../../src/core/errors.ts';
import { isoTimestamp, latitude, longitude, macAddress, solutionName, temperature } from '../../../src/core/validate.ts';

const refused = (f: () => unknown) => assert.throws(f, (e: unknown) => isReefError(e) && e.status === 400);

describe('isoTimestamp', () => {
  it('reads canonical and offset forms to the same instant', () => {
    const ms = Date.UTC(2024, 1, 29, 23, 59, 59, 999);
    assert.equal(isoTimestamp('2024-02-29T23:59:59.999Z', 't'), ms);
    assert.equal(isoTimestamp('2024-03-01T01:59:59.999+02:00', 't'), ms);
    assert.equal(isoTimestamp('2024-02-29T23:59:59.999z', 't'), ms);
    assert.equal(isoTimestamp('2024-02-29 23:59:59.999Z', 't'), ms);
    assert.equal(isoTimestamp('2024-02-29T23:59Z', 't'), Date.UTC(2024, 1, 29, 23, 59));
    assert.equal(isoTimestamp('1970-01-01T00:00:00.000Z', 't'), 0);
  });

  it('refuses impossible dates on both paths, no zone, and non-strings', () => {
    for (const v of [
      '2026-02-29T00:00:00.000Z',
      '2026-02-29T00:00:00Z',
      '2100-02-29T00:00:00.000Z',
      '2026-04-31T00:00:00.000Z',
      '2026-00-10T00:00:00.000Z',
      '2026-01-01T24:00:00.000Z',
      '2026-01-01T00:60:00.000Z',
      '2026-01-01T00:00:60.000Z',
      '2026-01-01T00:00:00.000',
      '2026-01-01',
      'now',
      '',
      '1969-12-31T23:59:59.999Z',
      '2026-01-01T00:00:00.0a0Z',
      '+02026-01-01T00:00:00.000Z',
    ]) {
      refused(() => isoTimestamp(v, 't'));
    }
    for (const v of [0, null, undefined, {}, ['2026-01-01T00:00:00Z']]) refused(() => isoTimestamp(v, 't'));
  });

  it('names the field in the error', () => {
    assert.throws(
      () => isoTimestamp('x', 'observations[4].timestamp'),
      (e: unknown) => isReefError(e) && e.field === 'observations[4].timestamp',
    );
  });
});

describe('other values', () => {
  it('coordinates are bounded and finite', () => {
    assert.equal(latitude(-90), -90);
    assert.equal(longitude(180), 180);
    for (const v of [90.0001, NaN, Infinity, '45', null]) refused(() => latitude(v));
    for (const v of [-180.0001, NaN, '7']) refused(() => longitude(v));
  });

  it('temperatures are finite numbers or numeric strings', () => {
    assert.equal(temperature('72.50', 't'), 72.5);
    assert.equal(temperature(' -3e1 ', 't'), -30);
    assert.equal(temperature(-0.0001, 't'), -0.0001);
    for (const v of ['NaN', 'Infinity', '-Infinity', '1e999', '', '0x10', '1,5', true, null, {}, Infinity]) refused(() => temperature(v, 't'));
  });

  it('MACs: 16 hex digits, separators allowed, stored lower case', () => {
    assert.equal(macAddress('00:13:50:05:FF:12:34:AB'), '00135005ff1234ab');
    for (const v of ['0013', '00135005ff1234ag', '00135005ff1234ab00']) refused(() => macAddress(v));
  });

  it('solution names are case sensitive and plain', () => {
    assert.equal(solutionName('StudioSimulation'), 'StudioSimulation');
    for (const v of ['', '..', 'a..b', '.x', 'a/b', 'ä', 'a b', 'x'.repeat(65)]) refused(() => solutionName(v));
  });
});
