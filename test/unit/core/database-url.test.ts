// REEF_DATABASE_URL's host list (src/core/database-url.ts): libpq's forms read, each host's URL as
// node-postgres reads it, malformed lists refused by the configuration without repeating the URL,
// and the start-up error's words for each host's state.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { parse } from 'pg-connection-string';
import { ConfigError, loadConfig } from '../../../src/config/config.ts';
import { DatabaseUrlError, describeHostError, hostLabel, noWritableHostMessage, parseDatabaseUrl } from '../../../src/core/database-url.ts';

it('reads one host, with its port or 5432', () => {
  assert.deepEqual(parseDatabaseUrl('postgres://reef:secret@db.internal:6432/reef').hosts, [{ host: 'db.internal', port: 6432 }]);
  assert.deepEqual(parseDatabaseUrl('postgresql://reef@db.internal/reef').hosts, [{ host: 'db.internal', port: 5432 }]);
  assert.deepEqual(parseDatabaseUrl('postgres:///reef').hosts, [{ host: 'localhost', port: 5432 }]);
});

it('reads a host list in the authority, each host with its own port or 5432, IPv6 in brackets', () => {
  const u = parseDatabaseUrl('postgres://reef@h1:5432,h2:5433,h3,[::1]:7000,[fd00::2]/reef?target_session_attrs=read-write');
  assert.deepEqual(u.hosts, [
    { host: 'h1', port: 5432 },
    { host: 'h2', port: 5433 },
    { host: 'h3', port: 5432 },
    { host: '::1', port: 7000 },
    { host: 'fd00::2', port: 5432 },
  ]);
  assert.equal(u.targetSessionAttrs, 'read-write');
  assert.deepEqual(u.hosts.map(hostLabel), ['h1:5432', 'h2:5433', 'h3:5432', '[::1]:7000', '[fd00::2]:5432']);
  assert.equal(parseDatabaseUrl('postgres://reef@h1,h2/reef?target_session_attrs=primary').targetSessionAttrs, 'primary');
  assert.equal(parseDatabaseUrl('postgres://reef@h1,h2/reef').targetSessionAttrs, 'read-write', 'Reef always wants the writable host');
});

it("reads libpq's host= and port= parameters: one port for all hosts or one per host", () => {
  assert.deepEqual(parseDatabaseUrl('postgres://reef@/reef?host=h1,h2&port=5432,5433').hosts, [
    { host: 'h1', port: 5432 },
    { host: 'h2', port: 5433 },
  ]);
  assert.deepEqual(parseDatabaseUrl('postgres://reef@/reef?host=h1,h2&port=6000').hosts, [
    { host: 'h1', port: 6000 },
    { host: 'h2', port: 6000 },
  ]);
  assert.deepEqual(parseDatabaseUrl('postgres://reef@localhost/reef?host=/var/run/postgresql').hosts, [{ host: '/var/run/postgresql', port: 5432 }]);
});

it('gives each host a URL of its own that node-postgres reads as that host, the other settings kept', () => {
  const u = parseDatabaseUrl('postgres://reef:p%40ss@h1:5432,[::1]:5433/reef%20db?target_session_attrs=read-write&application_name=x&sslmode=disable');
  const [h1, h2] = u.hosts as [(typeof u.hosts)[0], (typeof u.hosts)[0]];
  for (const [h, host, port] of [
    [h1, 'h1', '5432'],
    [h2, '::1', '5433'],
  ] as const) {
    const c = parse(u.urlFor(h));
    assert.equal(c.host, host);
    assert.equal(String(c.port), port);
    assert.equal(c.user, 'reef');
    assert.equal(c.password, 'p@ss');
    assert.equal(c.database, 'reef db');
    assert.equal(c.application_name, 'x');
    assert.equal((c as Record<string, unknown>).target_session_attrs, undefined, 'the choice of host is Reef’s, not the driver’s');
  }
  const socket = parseDatabaseUrl('postgres://reef@localhost/reef?host=/var/run/postgresql&port=5433');
  const c = parse(socket.urlFor(socket.hosts[0]!));
  assert.equal(c.host, '/var/run/postgresql');
  assert.equal(String(c.port), '5433');
  assert.equal(c.database, 'reef');
});

it('refuses a malformed host list, saying what is wrong and never repeating the URL', () => {
  const bad: [string, RegExp][] = [
    ['postgres://reef:hunter2@h1,,h2/reef', /empty host/],
    ['postgres://reef:hunter2@h1,/reef', /empty host/],
    ['postgres://reef:hunter2@h1:99999,h2/reef', /bad port "99999" for h1/],
    ['postgres://reef:hunter2@h1,h2:abc/reef', /bad port "abc" for h2/],
    ['postgres://reef:hunter2@h1:0/reef', /bad port "0"/],
    ['postgres://reef:hunter2@[::1/reef', /malformed host/],
    ['postgres://reef:hunter2@/reef?host=h1,h2,h3&port=1,2', /3 hosts and 2 ports/],
    ['postgres://reef:hunter2@h1,h2/reef?target_session_attrs=read-only', /target_session_attrs=read-only: Reef writes/],
    ['postgres://reef:hunter2@h1,h2/reef?target_session_attrs=any', /target_session_attrs=any: Reef writes/],
    ['postgres://reef:hunter2@h1,h2/reef?target_session_attrs=writable', /does not know/],
    ['mysql://reef:hunter2@h1/reef', /must start with postgres:\/\//],
  ];
  for (const [url, why] of bad) {
    assert.throws(
      () => parseDatabaseUrl(url),
      (e: Error) => e instanceof DatabaseUrlError && why.test(e.message) && !e.message.includes('hunter2'),
      url,
    );
    assert.throws(
      () => loadConfig({ REEF_DATABASE_URL: url }, {}),
      (e: Error) => e instanceof ConfigError && e.problems.some((p) => p.startsWith('REEF_DATABASE_URL (--database-url) ') && why.test(p)) && !e.message.includes('hunter2'),
      url,
    );
  }
  assert.equal(
    loadConfig({ REEF_DATABASE_URL: 'postgres://reef@h1:5432,h2:5433/reef?target_session_attrs=read-write' }, {}).databaseUrl,
    'postgres://reef@h1:5432,h2:5433/reef?target_session_attrs=read-write',
  );
});

it("names each host's state when none is writable", () => {
  const states = [
    { host: { host: 'h1', port: 5432 }, state: describeHostError(Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:5432'), { code: 'ECONNREFUSED' })) },
    { host: { host: 'h2', port: 5433 }, state: 'read-only (standby)' },
    { host: { host: '::1', port: 5434 }, state: describeHostError(new Error('timeout expired')) },
    { host: { host: 'h4', port: 5432 }, state: describeHostError(Object.assign(new Error('getaddrinfo ENOTFOUND h4'), { code: 'ENOTFOUND' })) },
    { host: { host: 'h5', port: 5432 }, state: describeHostError(Object.assign(new Error('password authentication failed for user "reef"'), { code: '28P01' })) },
  ];
  assert.equal(
    noWritableHostMessage(states),
    'no writable PostgreSQL host: h1:5432 refused connection; h2:5433 read-only (standby); [::1]:5434 did not answer in time; h4:5432 host name not found; h5:5432 refused the login (password authentication failed for user "reef")',
  );
});
