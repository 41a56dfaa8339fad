// The webhook target classifier (docs/security.md "Webhook targets"): the address classes that reach
// non-public hosts by another road — IPv6 forms that carry an IPv4 address (IPv4-compatible, NAT64,
// 6to4), site-local, the documentation ranges, and the node's own interface addresses — are refused
// like loopback and RFC 1918; ordinary public addresses still pass. No socket is opened.
import assert from 'node:assert/strict';
import os from 'node:os';
import { describe, it } from 'node:test';
import { blockedAddress, forbiddenAddress } from '../../../src/alarms/egress.ts';

describe('webhook target classifier', () => {
  it('refuses NAT64, 6to4, IPv4-compatible, site-local and documentation addresses', () => {
    for (const a of [
      '64:ff9b::7f00:1', // NAT64 of 127.0.0.1
      '64:ff9b::a9fe:a9fe', // NAT64 of 169.254.169.254
      '64:ff9b::808:808', // NAT64 of a public address: still refused, the translator is inside
      '64:ff9b:1::a00:1', // local-use NAT64
      '2002:7f00:1::1', // 6to4 of 127.0.0.1
      '2002:a00:1::1', // 6to4 of 10.0.0.1
      '::127.0.0.1', // IPv4-compatible
      '::a9fe:a9fe', // IPv4-compatible 169.254.169.254
      'fec0::1', // site-local
      'feff::1',
      '192.0.2.1',
      '198.51.100.7',
      '203.0.113.255',
      '2001:db8::1',
      '2001:0db8:85a3::8a2e:370:7334',
    ])
      assert.equal(forbiddenAddress(a), true, a);
  });

  it("refuses the node's own interface addresses, whatever their class", () => {
    const mine = Object.values(os.networkInterfaces())
      .flat()
      .map((i) => i?.address)
      .filter((a): a is string => typeof a === 'string');
    assert.ok(mine.length > 0, 'the machine has interface addresses');
    for (const a of mine) {
      assert.equal(forbiddenAddress(a), true, a);
      // An operator's allow-all (a lab) still lets them through.
      assert.equal(blockedAddress(a, { allowPrivate: true }), false, a);
    }
  });

  it('still lets ordinary public addresses through', () => {
    const mine = new Set(Object.values(os.networkInterfaces()).flatMap((l) => (l ?? []).map((i) => i.address)));
    for (const a of ['8.8.8.8', '1.1.1.1', '93.184.215.14', '192.0.3.1', '198.51.101.1', '203.0.114.1', '2606:4700:4700::1111', '2001:db9::1', '2003::1', '64:ff9a::1', '::ffff:8.8.8.8']) {
      if (mine.has(a)) continue;
      assert.equal(forbiddenAddress(a), false, a);
    }
  });
});
