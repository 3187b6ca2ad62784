'use strict';
// The node suites' checks (tests/mcp, tests/cdp): each check says ok or
// FAIL with what it saw; every check runs, and the suite ends with
// exit status 1 when any failed (done()).

function checks(prefix) {
  const failures = [];
  const say = (s) => console.log(`${prefix}: ${s}`);
  const fail = (label, msg) => {
    failures.push(`${label}: ${msg}`);
    say(`FAIL ${label}: ${msg}`);
  };
  const expect = (label, ok, detail) => {
    if (ok) say(`ok   ${label}`);
    else fail(label, detail === undefined ? 'not as expected' : String(detail).slice(0, 800));
  };
  // Runs fn; an exception fails the check named label.
  const check = async (label, fn) => {
    try {
      await fn();
    } catch (e) {
      fail(label, e.stack || String(e));
    }
  };
  // Ends the suite: exit 1 naming every failure, or says all passed.
  const done = () => {
    if (failures.length) {
      console.error(`${prefix}: ${failures.length} check(s) failed:\n  ${failures.join('\n  ')}`);
      process.exit(1);
    }
    say('all checks passed');
  };
  // Stops the suite's gateway (its log shown when a check failed) and its
  // loopback sites; the denied site must have seen no request. Then done().
  const finish = async (gw, allowed, denied) => {
    if (failures.length) console.error(`the gateway's log (last 4000 bytes):\n${gw.log.slice(-4000)}`);
    await gw.stop();
    // A sanitized build says what went wrong on the gateway's stderr.
    const san = /(ERROR: (Address|Leak)Sanitizer|runtime error:)[^\n]*/.exec(gw.log);
    expect('the gateway stopped without a sanitizer report', !san, san && san[0]);
    allowed.srv.close();
    denied.srv.close();
    expect('the denied site saw no request', denied.log.length === 0, denied.log.join(', '));
    done();
  };
  return { failures, say, fail, expect, check, done, finish };
}

module.exports = { checks };
