// The gate's listener (desktop/worker/gate.c): evaluated in the isolated
// world DG_GATE_WORLD of a page's main frame, which the page's scripts can
// neither see nor reach. Embedded into the worker at build time as
// dg_gate_js, a function expression that gate.c calls with its limits:
//
//   RING   pointer events whose time and target are kept (DG_GATE_RING)
//   KEPT   DOM changes whose time and node are kept (DG_GATE_RECORDS)
//   RULES  style rules read for :hover at most (DG_GATE_RULES)
//   MEDIA  canvas, video, embed and object elements looked at at most
//          (DG_GATE_MEDIA)
//
// It installs the listener once per document and answers the snapshot
// [count, viewport x, y, width, height, event number]. Then
// __deskgatePointer.wait(want, x, y, k0, ms) resolves [answer,
// ...snapshot] once the page has seen `want` button changes with the
// pointer at x, y and has committed the animation frame after them:
// answer 1 when nothing the page shows changed since the action's first
// event (the first after event k0), 3 when something did (its repaint is
// on its way), 2 when the page may have drawn what no DOM change shows
// (an animation or transition runs, its next frames coming later; a
// canvas, video, embed or object is shown; the focus moved; a form
// control's value changed), 0 when the input was not seen within ms.
(function (RING, KEPT, RULES, MEDIA) {
  let s = window.__deskgatePointer;
  const snapshot = () => [s.n, s.ox, s.oy, innerWidth, innerHeight, s.k];
  if (s) return snapshot();
  s = window.__deskgatePointer = {
    n: 0, k: 0, x: NaN, y: NaN, ox: 0, oy: 0, wake: null,
    ts: [], tg: [], af: [], mk: 0, mq: [], ed: -1,
  };

  // Trusted pointer events on the window in the capture phase, before the
  // page's listeners on its elements. A button change is a pointerdown, a
  // pointerup or a chorded pointermove (button not -1): each X press or
  // release of buttons 1-3 is exactly one.
  const seen = (e) => {
    if (!e.isTrusted) return;
    const now = performance.now();
    const i = ++s.k % RING;
    s.ts[i] = e.timeStamp > 0 && e.timeStamp <= now ? e.timeStamp : now;
    s.tg[i] = e.target;
    s.af[i] = document.activeElement; // before a press's default action moves the focus
    if (e.button !== -1) s.n++;
    s.x = e.screenX;
    s.y = e.screenY;
    s.ox = e.screenX - e.clientX;
    s.oy = e.screenY - e.clientY;
    if (s.wake) s.wake();
  };
  for (const t of ['pointerdown', 'pointerup', 'pointermove']) addEventListener(t, seen, true);
  // A checkbox, a radio button or a select changed by the input: the
  // control repaints, but no attribute changes.
  const edited = (e) => { if (e.isTrusted) s.ed = performance.now(); };
  for (const t of ['input', 'change']) addEventListener(t, edited, true);

  // The page's DOM changes, kept as they come; whether their nodes are
  // shown is asked only once the input's frame is committed (layout is
  // clean then: asking here would lay the page out in the middle of its
  // own work).
  new MutationObserver((rs) => {
    const now = performance.now();
    for (let i = Math.max(0, rs.length - KEPT); i < rs.length; i++) s.mq[s.mk++ % KEPT] = [now, rs[i].target];
  }).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });

  const shown = (n) => {
    const e = n.nodeType === 1 ? n : n.parentElement;
    if (!e || !e.isConnected || (e.checkVisibility && !e.checkVisibility())) return false;
    const b = e.getBoundingClientRect();
    return b.width > 0 && b.height > 0 && b.right > 0 && b.bottom > 0 &&
      b.left < innerWidth && b.top < innerHeight;
  };

  // For each selector of a rule that names :hover, the compound it is on,
  // without :hover and pseudo-elements: an element whose hover state
  // changed and matches it may look different now. :hover inside a
  // pseudo-class's parentheses gives '*'.
  const compounds = (text, out) => {
    const split = (str, at) => {
      const parts = [];
      let depth = 0, from = 0;
      for (let i = 0; i < str.length; i++) {
        const c = str[i];
        if (c === '(' || c === '[') depth++;
        else if (c === ')' || c === ']') depth--;
        else if (depth === 0 && at.includes(c)) { parts.push(str.slice(from, i)); from = i + 1; }
      }
      parts.push(str.slice(from));
      return parts;
    };
    for (const sel of split(text, ',')) {
      if (!sel.includes(':hover')) continue;
      const own = split(sel, ' >+~').find((c) => c.includes(':hover'));
      const c = own === undefined ? '*' : own
        .replace(/:hover/g, '')
        .replace(/::?(before|after|first-line|first-letter|marker|placeholder|selection|backdrop)\b.*$/, '')
        .replace(/::.*$/, '');
      out.push(c.trim() === '' ? '*' : c);
    }
  };
  // The compounds of every rule the page's style sheets (its own and
  // adopted ones) hold; null when there are more than RULES rules.
  // Sheets from another origin cannot be read: their :hover rules are
  // not known.
  const hoverRules = () => {
    const out = [];
    let n = 0;
    const walk = (rules) => {
      for (const r of rules) {
        if (++n > RULES) return;
        if (r.selectorText && r.selectorText.includes(':hover')) compounds(r.selectorText, out);
        if (r.cssRules) walk(r.cssRules);
      }
    };
    for (const sheet of [...document.styleSheets, ...(document.adoptedStyleSheets || [])]) {
      try { walk(sheet.cssRules); } catch (e) { /* another origin's sheet */ }
    }
    return n > RULES ? null : out;
  };
  const ancestors = (e) => {
    const list = [];
    for (; e && e.nodeType === 1; e = e.parentElement) list.push(e);
    return list;
  };

  // The ring slot of the first event after k0 still kept (the oldest kept
  // when more than RING came since); -1 when none came.
  const firstAfter = (k0) => {
    const d = s.k - k0;
    return d < 1 ? -1 : (d <= RING ? k0 + 1 : s.k + 1) % RING;
  };

  // Whether the page changed something it shows since the first event
  // after k0: a DOM change to a shown node, more changes than kept, or a
  // hover state that changed on an element a :hover rule is on.
  const changed = (k0) => {
    const i = firstAfter(k0);
    if (i < 0) return false;
    const d = s.k - k0;
    const from = s.ts[i];
    if (s.mk > KEPT && s.mq[s.mk % KEPT][0] >= from) return true;
    if (s.mq.some((m) => m[0] >= from && shown(m[1]))) return true;
    const was = k0 > 0 && d < RING ? s.tg[k0 % RING] : null;
    const now = s.tg[s.k % RING];
    if (was === now) return false;
    const before = ancestors(was), after = ancestors(now);
    const moved = before.filter((e) => !after.includes(e))
      .concat(after.filter((e) => !before.includes(e)))
      .filter((e) => e.isConnected);
    if (moved.length === 0) return false;
    const rules = hoverRules();
    return rules === null || moved.some((e) => rules.some((c) => {
      try { return e.matches(c); } catch (x) { return true; }
    }));
  };

  // Whether the page may have drawn, since the first event after k0, what
  // no DOM change shows: a canvas, video, embed or object in its viewport
  // (more than MEDIA of them count as shown), the focus moved (a :focus
  // style), a form control's value changed.
  const unseen = (k0) => {
    const i = firstAfter(k0);
    if (i < 0) return false;
    if (s.af[i] !== document.activeElement || s.ed >= s.ts[i]) return true;
    const media = document.querySelectorAll('canvas, video, embed, object');
    if (media.length > MEDIA) return true;
    for (const e of media) if (shown(e)) return true;
    return false;
  };

  s.wait = (want, x, y, k0, ms) => new Promise((resolve) => {
    let wake = null;
    const timer = setTimeout(() => {
      if (s.wake === wake) s.wake = null;
      resolve([0, ...snapshot()]);
    }, ms);
    wake = () => {
      if (s.n < want || s.x !== x || s.y !== y) return;
      s.wake = null;
      clearTimeout(timer);
      // The message posted from the frame's callback runs once that frame
      // is committed: the input's handlers ran before it.
      requestAnimationFrame(() => {
        const c = new MessageChannel();
        c.port1.onmessage = () => {
          const animating = document.getAnimations().some((a) => a.playState === 'running');
          resolve([animating ? 2 : changed(k0) ? 3 : unseen(k0) ? 2 : 1, ...snapshot()]);
        };
        c.port2.postMessage(0);
      });
    };
    s.wake = wake;
    wake();
  });
  return snapshot();
})
