// The worker's reader of pages: read_page and get_page_text (tree.c).
//
// Contract: evaluated by the worker in its own isolated world of the page's
// main frame (DG_TREE_WORLD), never in the page's world: page scripts
// cannot see these functions, their state, or replace what they call
// (prototypes, getters and globals of the page's world are not those of
// this world; the DOM they read is shared, and hostile). Installed once per
// document; a new document (a navigation) starts with no references.
//
// Everything is bounded by the caller's limits (opts): the output is
// refused, not cut, when it exceeds opts.cap characters; the walk stops
// after opts.visitMax elements; names and texts are cut at opts.nameMax.
// Results are plain objects returned by value: {ok: true, text} or
// {ok: false, error}, their strings well-formed UTF-16 (no lone
// surrogates).
window.__deskgatePage = window.__deskgatePage || (() => {
	'use strict';
	// References: ref_N for an element, stable while the document lives.
	// Held weakly: an element the page dropped becomes a stale reference.
	const refs = { next: 1, byId: new Map(), ofEl: new WeakMap() };

	const refOf = (el) => {
		let id = refs.ofEl.get(el);
		if (!id) {
			id = refs.next++;
			refs.ofEl.set(el, id);
			refs.byId.set(id, new WeakRef(el));
		}
		return 'ref_' + id;
	};

	const byRef = (n) => {
		const w = refs.byId.get(n);
		const el = w && w.deref();
		return el && el.isConnected ? el : null;
	};

	const INPUT_ROLES = {
		button: 'button', submit: 'button', reset: 'button', image: 'button',
		checkbox: 'checkbox', radio: 'radio', range: 'slider', number: 'spinbutton',
		search: 'searchbox', email: 'textbox', tel: 'textbox', text: 'textbox',
		url: 'textbox', password: 'textbox', date: 'textbox', 'datetime-local': 'textbox',
		month: 'textbox', week: 'textbox', time: 'textbox', color: 'button', file: 'button',
	};
	const TAG_ROLES = {
		BUTTON: 'button', SELECT: 'combobox', TEXTAREA: 'textbox', IMG: 'img',
		H1: 'heading', H2: 'heading', H3: 'heading', H4: 'heading', H5: 'heading', H6: 'heading',
		NAV: 'navigation', MAIN: 'main', ASIDE: 'complementary', FORM: 'form',
		TABLE: 'table', TR: 'row', TD: 'cell', TH: 'columnheader', UL: 'list', OL: 'list',
		LI: 'listitem', DIALOG: 'dialog', OPTION: 'option', SUMMARY: 'button',
		DETAILS: 'group', FIELDSET: 'group', PROGRESS: 'progressbar', IFRAME: 'iframe',
		ARTICLE: 'article', P: 'paragraph', LABEL: 'label', HEADER: 'banner',
		FOOTER: 'contentinfo', SECTION: 'region', VIDEO: 'video', AUDIO: 'audio',
		HR: 'separator', MENU: 'list', METER: 'meter', OUTPUT: 'status',
	};
	// Roles whose name comes from their content: the text is in the name,
	// not repeated as text lines under it.
	const FROM_CONTENT = new Set(['button', 'link', 'heading', 'cell', 'columnheader',
		'option', 'tab', 'menuitem', 'checkbox', 'radio', 'switch', 'treeitem', 'label']);
	const INTERACTIVE = new Set(['button', 'link', 'checkbox', 'radio', 'textbox',
		'searchbox', 'combobox', 'listbox', 'slider', 'spinbutton', 'switch', 'tab',
		'menuitem', 'option', 'treeitem']);
	const SKIP = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'META', 'LINK']);

	// Whitespace collapsed, cut at max characters: a megabyte of text in
	// one element costs a slice, not a pass over all of it.
	const clean = (s, max) => {
		s = String(s == null ? '' : s);
		if (s.length > max * 8)
			s = s.slice(0, max * 8);
		s = s.replace(/\s+/g, ' ').trim();
		return s.length > max ? s.slice(0, max) + '…' : s;
	};
	const quote = (s) => JSON.stringify(s);

	const roleOf = (el) => {
		const explicit = (el.getAttribute('role') || '').trim().split(/\s+/)[0];
		if (explicit)
			return explicit === 'presentation' || explicit === 'none' ? '' : explicit;
		if (el.tagName === 'A')
			return el.hasAttribute('href') ? 'link' : '';
		if (el.tagName === 'INPUT') {
			const t = (el.getAttribute('type') || 'text').toLowerCase();
			return t === 'hidden' ? '' : INPUT_ROLES[t] || 'textbox';
		}
		if (el.tagName === 'SELECT' && (el.multiple || el.size > 1))
			return 'listbox';
		if (el.tagName === 'SECTION' && !el.hasAttribute('aria-label') &&
		    !el.hasAttribute('aria-labelledby'))
			return '';
		if (el.isContentEditable && el.getAttribute('contenteditable') !== null)
			return 'textbox';
		return TAG_ROLES[el.tagName] || '';
	};

	const textOfIds = (el, attr, max) => {
		const ids = (el.getAttribute(attr) || '').split(/\s+/).filter(Boolean);
		const doc = el.ownerDocument;
		return clean(ids.map((id) => {
			const t = doc.getElementById(id);
			return t ? t.textContent : '';
		}).join(' '), max);
	};

	const nameOf = (el, role, max) => {
		let n = textOfIds(el, 'aria-labelledby', max) || clean(el.getAttribute('aria-label'), max);
		if (n)
			return n;
		if (el.labels && el.labels.length)
			n = clean(Array.from(el.labels, (l) => l.textContent).join(' '), max);
		if (!n && el.tagName === 'IMG')
			n = clean(el.getAttribute('alt'), max);
		if (!n && el.tagName === 'INPUT' && /^(button|submit|reset)$/i.test(el.type))
			n = clean(el.value || el.type, max);
		if (!n && FROM_CONTENT.has(role))
			n = clean(el.innerText !== undefined ? el.innerText : el.textContent, max);
		if (!n)
			n = clean(el.getAttribute('title') || el.getAttribute('placeholder'), max);
		return n;
	};

	const interactive = (el, role) => INTERACTIVE.has(role) || el.tabIndex >= 0 &&
		el.hasAttribute('tabindex') || el.hasAttribute('onclick');

	// Rendered: has boxes and is not hidden; on screen: a box meets the
	// viewport.
	const boxOf = (el) => {
		const r = el.getBoundingClientRect();
		return { x: r.left, y: r.top, w: r.width, h: r.height };
	};
	// checkVisibility is the browser's own answer (no box, display: none,
	// content-visibility, visibility: hidden), without building a style
	// object per element: the first reading of a 2,000-element page took
	// 323 ms with getComputedStyle, most of it there.
	const rendered = (el) => el.checkVisibility({ visibilityProperty: true });
	// An element without a box of its own (display: contents) whose
	// children may render: not listed, but walked.
	const wrapper = (el) => !el.getClientRects().length &&
		getComputedStyle(el).display === 'contents';
	const onScreen = (b) => b.x < innerWidth && b.y < innerHeight && b.x + b.w > 0 && b.y + b.h > 0;

	const details = (el, role, max) => {
		const d = [];
		if (role === 'link' && el.getAttribute('href'))
			d.push('href=' + quote(clean(el.getAttribute('href'), max)));
		if (el.tagName === 'INPUT' || el.tagName === 'TEXTAREA') {
			if (el.type && el.tagName === 'INPUT' && role === 'textbox' && el.type !== 'text')
				d.push('type=' + quote(el.type));
			if (el.placeholder)
				d.push('placeholder=' + quote(clean(el.placeholder, max)));
			if (el.type === 'password' && el.value)
				d.push('value="••••"');
			else if (el.value && !/^(button|submit|reset|checkbox|radio)$/.test(el.type))
				d.push('value=' + quote(clean(el.value, max)));
		}
		if (el.tagName === 'SELECT' && el.selectedOptions.length)
			d.push('value=' + quote(clean(el.selectedOptions[0].textContent, max)));
		if (role === 'heading')
			d.push('level=' + (Number(el.tagName[1]) || Number(el.getAttribute('aria-level')) || 2));
		if ('checked' in el && /^(checkbox|radio)$/.test(el.type))
			d.push(el.checked ? 'checked' : 'unchecked');
		else if (el.getAttribute('aria-checked'))
			d.push(el.getAttribute('aria-checked') === 'true' ? 'checked' : 'unchecked');
		if (el.disabled || el.getAttribute('aria-disabled') === 'true')
			d.push('disabled');
		if (el.getAttribute('aria-expanded'))
			d.push(el.getAttribute('aria-expanded') === 'true' ? 'expanded' : 'collapsed');
		if (el.required)
			d.push('required');
		return d.length ? ' ' + d.join(' ') : '';
	};

	const readPage = (opts) => {
		let root = document.body || document.documentElement;
		if (opts.ref) {
			root = byRef(opts.ref);
			if (!root)
				return { ok: false, error: 'ref_' + opts.ref + ' is unknown or stale: the tab ' +
					'navigated or the element went away since the read_page or find that ' +
					'gave it; read the page again' };
		}
		const out = [];
		let size = 0, visited = 0, over = false, cut = false;
		const emit = (line) => {
			size += line.length + 1;
			if (size > opts.cap)
				over = true;
			else
				out.push(line);
		};
		const walk = (node, level, nameFromContent, inView) => {
			if (over || cut)
				return;
			if (node.nodeType === 3) {
				if (nameFromContent || opts.filter === 'interactive' || level >= opts.depth ||
				    opts.filter !== 'all' && !inView)
					return;
				const t = clean(node.data, opts.nameMax);
				if (t)
					emit('  '.repeat(level) + '- text ' + quote(t));
				return;
			}
			if (node.nodeType !== 1 || SKIP.has(node.tagName))
				return;
			if (++visited > opts.visitMax) {
				cut = true;
				return;
			}
			const el = node;
			if (!rendered(el) && el.tagName !== 'OPTION') {
				if (wrapper(el))
					for (const k of el.childNodes)
						walk(k, level, nameFromContent, inView);
				return;
			}
			const role = roleOf(el);
			const seen = opts.filter === 'all' || onScreen(boxOf(el));
			let shown = (!!role || interactive(el, role)) && seen;
			if (shown && opts.filter === 'interactive' && !interactive(el, role))
				shown = false;
			let next = level;
			if (shown) {
				if (level >= opts.depth)
					return;
				const r = role || 'generic';
				const name = nameOf(el, r, opts.nameMax);
				emit('  '.repeat(level) + '- ' + r + (name ? ' ' + quote(name) : '') +
					' [' + refOf(el) + ']' + details(el, r, opts.nameMax));
				next = level + 1;
				nameFromContent = nameFromContent || FROM_CONTENT.has(r) && !!name;
			}
			if (el.tagName === 'IFRAME')
				return;
			const kids = el.shadowRoot ? el.shadowRoot.childNodes : el.childNodes;
			for (const k of kids)
				walk(k, next, nameFromContent, seen);
		};
		walk(root, 0, false, true);
		if (over)
			return { ok: false, error: 'the tree is over ' + opts.cap + ' characters (the cap): ' +
				'narrow it with ref (a subtree) or a smaller depth' };
		let text = out.join('\n');
		if (cut)
			text += '\n[the walk stopped after ' + opts.visitMax + ' elements: narrow it with ref]';
		if (!text)
			text = opts.filter === 'interactive' ? '[no interactive element in view]' :
				'[nothing rendered in view]';
		return { ok: true, text };
	};

	// The page's readable text: the article (or main content) when there is
	// one, else the body, as rendered (innerText: no hidden text, no script).
	const pageText = (opts) => {
		const root = document.querySelector('article') || document.querySelector('main') ||
			document.querySelector('[role=main]') || document.body || document.documentElement;
		let t = root ? root.innerText || '' : '';
		t = t.replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim();
		if (t.length > opts.cap)
			t = t.slice(0, opts.cap) + '\n[the text was cut at ' + opts.cap + ' characters]';
		return { ok: true, text: t };
	};

	// find: elements matching a description, ranked without a model. The
	// query's words (letters and digits, lowercased; a few filler words
	// dropped) are looked up in each rendered element's role and name and
	// in its other text (label, placeholder, title, value, alt, id, name,
	// href, content). Per word: 3 when the name has it, 2 when it names the
	// role (or a word for it: "field" a textbox, "dropdown" a combobox),
	// 1 when the other text has it; 5 more when the name contains the whole
	// query; a quarter more for interactive elements, an eighth for those
	// in view. Elements with no word found are left out; ties keep document
	// order; at most opts.max are returned.
	const FILLER = new Set(['the', 'a', 'an', 'of', 'to', 'for', 'in', 'on', 'at', 'with',
		'and', 'or', 'this', 'that', 'it', 'is', 'element', 'page']);
	const ROLE_WORDS = {
		button: ['button'], link: ['link'], textbox: ['field', 'input', 'box', 'textbox',
		'text', 'textarea'], searchbox: ['search', 'field', 'input', 'box', 'searchbox'],
		combobox: ['dropdown', 'select', 'combobox', 'menu', 'list'], checkbox: ['checkbox',
		'check', 'tick'], radio: ['radio', 'option'], img: ['image', 'picture', 'icon',
		'img', 'logo'], heading: ['heading', 'title', 'header'], navigation: ['navigation',
		'nav', 'menu'], slider: ['slider', 'range'], tab: ['tab'], dialog: ['dialog',
		'modal', 'popup'], form: ['form'], table: ['table'], listitem: ['item'],
		menuitem: ['menu', 'item'], option: ['option'], banner: ['header'],
		contentinfo: ['footer'],
	};
	const words = (s) => (String(s).toLowerCase().match(/[\p{L}\p{N}]+/gu) || []);
	const find = (opts) => {
		const q = words(opts.query).filter((w) => !FILLER.has(w));
		const phrase = clean(opts.query, opts.nameMax).toLowerCase();
		if (!q.length)
			return { ok: false, error: 'the query has no words to look for' };
		const found = [];
		let visited = 0;
		const visit = (node) => {
			if (node.nodeType !== 1 || SKIP.has(node.tagName) || ++visited > opts.visitMax)
				return;
			const el = node;
			if (!rendered(el)) {
				if (wrapper(el))
					for (const k of el.childNodes)
						visit(k);
				return;
			}
			const role = roleOf(el);
			const act = interactive(el, role);
			if (role || act) {
				const r = role || 'generic';
				const name = nameOf(el, r, opts.nameMax);
				const nameWords = new Set(words(name));
				const other = new Set(words([el.getAttribute('placeholder'),
					el.getAttribute('title'), el.getAttribute('aria-label'), el.getAttribute('alt'),
					el.id, el.getAttribute('name'), el.getAttribute('href'),
					el.labels ? Array.from(el.labels, (l) => l.textContent).join(' ') : '',
					typeof el.value === 'string' ? el.value : '',
					clean(el.textContent, opts.nameMax)].join(' ')));
				let score = 0;
				for (const w of q) {
					if (nameWords.has(w))
						score += 3;
					else if (other.has(w))
						score += 1;
					if ((ROLE_WORDS[r] || [r]).includes(w))
						score += 2;
				}
				if (score > 0) {
					if (phrase && name.toLowerCase().includes(phrase))
						score += 5;
					if (act)
						score += 0.25;
					if (onScreen(boxOf(el)))
						score += 0.125;
					found.push({ score, order: found.length, line: '- ' + r +
						(name ? ' ' + quote(name) : '') + ' [' + refOf(el) + ']' +
						details(el, r, opts.nameMax) });
				}
			}
			if (el.tagName === 'IFRAME')
				return;
			for (const k of el.shadowRoot ? el.shadowRoot.childNodes : el.childNodes)
				visit(k);
		};
		visit(document.body || document.documentElement);
		found.sort((x, y) => y.score - x.score || x.order - y.order);
		const lines = found.slice(0, opts.max).map((f) => f.line);
		return { ok: true, text: lines.length ? lines.join('\n') :
			'[no element matches ' + quote(clean(opts.query, opts.nameMax)) + ']' };
	};

	// What goes back is well-formed: a page's text may hold lone surrogates
	// (String.fromCharCode(0xD800)), which the browser then writes into its
	// JSON reply as an escape no strict JSON parser takes (the worker's
	// dropped the reply, and get_page_text of such a page timed out).
	// They become U+FFFD.
	const wellFormed = (fn) => (opts) => {
		const r = fn(opts);
		if (typeof r.text === 'string')
			r.text = r.text.toWellFormed();
		if (typeof r.error === 'string')
			r.error = r.error.toWellFormed();
		if (r.element && typeof r.element.name === 'string')
			r.element.name = r.element.name.toWellFormed();
		return r;
	};

	// ---- acting on elements: where they are, setting their values --------
	//
	// The viewport on the screen, in screen pixels: the window's position
	// plus the browser's own bars above the page (the window has no frame
	// at the sides or below), its size the page's CSS viewport times the
	// device pixel ratio (which page zoom changes). Read in this world: the
	// page cannot redefine these getters here.
	const viewport = () => {
		const dpr = devicePixelRatio || 1;
		const w = Math.round(innerWidth * dpr), h = Math.round(innerHeight * dpr);
		return {
			x: Math.round(screenX + Math.max(0, outerWidth - w) / 2),
			y: Math.round(screenY + Math.max(0, outerHeight - h)),
			w, h, dpr,
		};
	};

	const stale = (n) => ({ ok: false, error: 'ref_' + n + ' is unknown or stale: the tab ' +
		'navigated or the element went away since the read_page or find that gave it; read ' +
		'the page again' });

	const label = (el, max) => {
		const r = roleOf(el) || 'generic';
		const n = nameOf(el, r, max);
		return r + (n ? ' ' + quote(n) : '');
	};

	// The element at a point, through open shadow roots.
	const deepAt = (x, y) => {
		let h = document.elementFromPoint(x, y);
		while (h && h.shadowRoot) {
			const inner = h.shadowRoot.elementFromPoint(x, y);
			if (!inner || inner === h)
				break;
			h = inner;
		}
		return h;
	};
	// Whether node is el or inside it, across shadow roots; a label of el
	// counts (a click on it is a click on el).
	const within = (node, el) => {
		for (let n = node; n; n = n.parentNode || n.host) {
			if (n === el)
				return true;
		}
		return !!(el.labels && Array.from(el.labels).some((l) => l === node || l.contains(node)));
	};
	const describe = (el, max) => {
		let d = '<' + el.tagName.toLowerCase();
		if (el.id)
			d += ' id=' + quote(clean(el.id, 40));
		const cls = clean(typeof el.className === 'string' ? el.className : '', 40);
		if (cls)
			d += ' class=' + quote(cls);
		return d + '> (' + label(el, max) + ')';
	};

	// locate: the viewport, and with opts.ref that element's box and the
	// point an action on it acts at, in screen pixels. opts.scroll: brought
	// into view first (centred) unless it is wholly in view; opts.hit: the
	// point must reach the element (not an overlay above it): the centre of
	// its part in view, else the first point of a 5x5 grid over that part
	// that does, else an error naming what covers it.
	const locate = (opts) => {
		const vp = viewport();
		if (!opts.ref)
			return { ok: true, viewport: vp };
		const el = byRef(opts.ref);
		if (!el)
			return stale(opts.ref);
		const what = 'ref_' + opts.ref + ' (' + label(el, opts.nameMax) + ')';
		if (!rendered(el))
			return { ok: false, error: what + ' is not rendered (hidden)' };
		let r = el.getBoundingClientRect();
		if (opts.scroll && (r.left < 0 || r.top < 0 || r.right > innerWidth ||
		    r.bottom > innerHeight)) {
			el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
			r = el.getBoundingClientRect();
		}
		const x0 = Math.max(r.left, 0), y0 = Math.max(r.top, 0);
		const x1 = Math.min(r.right, innerWidth), y1 = Math.min(r.bottom, innerHeight);
		if (x1 - x0 < 1 || y1 - y0 < 1)
			return { ok: false, error: what + (r.width < 1 || r.height < 1 ?
				' has no size on the screen' : ' is outside the viewport') };
		let px = (x0 + x1) / 2, py = (y0 + y1) / 2;
		if (opts.hit && !within(deepAt(px, py), el)) {
			const cover = deepAt(px, py);
			let found = false;
			for (let i = 0; i < 5 && !found; i++) {
				for (let j = 0; j < 5 && !found; j++) {
					const qx = x0 + (x1 - x0) * (j + 0.5) / 5, qy = y0 + (y1 - y0) * (i + 0.5) / 5;
					if (within(deepAt(qx, qy), el)) {
						px = qx;
						py = qy;
						found = true;
					}
				}
			}
			if (!found)
				return { ok: false, error: what + ' is covered by ' +
					(cover ? describe(cover, opts.nameMax) : 'nothing the page can name') +
					': an action there would reach that instead' };
		}
		const sx = (v) => Math.round(vp.x + v * vp.dpr), sy = (v) => Math.round(vp.y + v * vp.dpr);
		const role = roleOf(el) || 'generic';
		return {
			ok: true, viewport: vp,
			element: {
				ref: 'ref_' + opts.ref, role, name: nameOf(el, role, opts.nameMax),
				tag: el.tagName.toLowerCase(),
				type: el.tagName === 'INPUT' ? String(el.type || 'text').toLowerCase() : '',
				box: [sx(x0), sy(y0), Math.max(1, sx(x1) - sx(x0)), Math.max(1, sy(y1) - sy(y0))],
				point: [Math.floor(vp.x + px * vp.dpr), Math.floor(vp.y + py * vp.dpr)],
			},
		};
	};

	// The value setters of this world's prototypes are the browser's own:
	// a page that replaced its own HTMLInputElement.prototype.value (or
	// React's per-node tracker) does not see the set, only the events.
	const setNative = (el, v) => {
		const proto = el.tagName === 'TEXTAREA' ? HTMLTextAreaElement.prototype :
			el.tagName === 'SELECT' ? HTMLSelectElement.prototype : HTMLInputElement.prototype;
		Object.getOwnPropertyDescriptor(proto, 'value').set.call(el, v);
	};
	const fire = (el, ...types) => {
		for (const t of types)
			el.dispatchEvent(new Event(t, { bubbles: true }));
	};
	const TEXTLIKE = new Set(['text', 'search', 'email', 'tel', 'url', 'password', 'number',
		'date', 'datetime-local', 'month', 'week', 'time', 'color', 'range']);

	// formInput: sets a form field as a user would (focus, value, input and
	// change events): a text field or textarea to a string or number, a
	// select to the option whose value or text is the value, a checkbox or
	// radio to a boolean, a contenteditable to a string (as typed: an
	// insertText edit, with beforeinput and input).
	const formInput = (opts) => {
		const el = byRef(opts.ref);
		if (!el)
			return stale(opts.ref);
		const what = 'ref_' + opts.ref + ' (' + label(el, opts.nameMax) + ')';
		const v = opts.value;
		const tag = el.tagName;
		const type = tag === 'INPUT' ? String(el.type || 'text').toLowerCase() : '';
		if (el.disabled)
			return { ok: false, error: what + ' is disabled' };
		if ((tag === 'INPUT' || tag === 'TEXTAREA') && el.readOnly)
			return { ok: false, error: what + ' is read-only' };
		if (type === 'checkbox' || type === 'radio') {
			if (typeof v !== 'boolean')
				return { ok: false, error: what + ' is a ' + type + ': its value is true or false' };
			if (type === 'radio' && !v && el.checked)
				return { ok: false, error: what + ' is a radio button: choose another of its ' +
					'group to clear it' };
			el.focus();
			if (el.checked !== v)
				el.click(); // toggles, with click, input and change, as a user's click
			return { ok: true, text: what + (el.checked ? ' is checked' : ' is unchecked') };
		}
		if (typeof v === 'boolean')
			return { ok: false, error: what + ' takes text, not true or false' };
		const sv = String(v);
		if (tag === 'SELECT') {
			const opt = Array.from(el.options);
			const o = opt.find((x) => x.value === sv) || opt.find((x) => clean(x.textContent,
				opts.nameMax) === clean(sv, opts.nameMax)) || opt.find((x) =>
				clean(x.textContent, opts.nameMax).toLowerCase() === clean(sv, opts.nameMax).toLowerCase());
			if (!o)
				return { ok: false, error: what + ' has no option ' + quote(clean(sv, opts.nameMax)) +
					' (options: ' + opt.slice(0, 20).map((x) => quote(clean(x.textContent, 60))).join(', ') +
					(opt.length > 20 ? ', ...' : '') + ')' };
			if (o.disabled)
				return { ok: false, error: what + ': the option ' + quote(clean(o.textContent, 60)) +
					' is disabled' };
			el.focus();
			if (el.multiple)
				for (const x of opt)
					x.selected = x === o;
			else
				setNative(el, o.value);
			fire(el, 'input', 'change');
			return { ok: true, text: what + ' is set to ' + quote(clean(o.textContent, opts.nameMax)) };
		}
		if (tag === 'TEXTAREA' || (tag === 'INPUT' && TEXTLIKE.has(type))) {
			if (type === 'number' || type === 'range') {
				if (sv.trim() === '' || !Number.isFinite(Number(sv)))
					return { ok: false, error: what + ' takes a number' };
			}
			el.focus();
			setNative(el, sv);
			fire(el, 'input', 'change');
			if (el.value !== sv && type !== 'number' && type !== 'range')
				return { ok: false, error: what + ' did not take the value (it holds ' +
					quote(clean(el.value, opts.nameMax)) + ': its format differs)' };
			return { ok: true, text: what + ' is set to ' + quote(clean(el.value, opts.nameMax)) };
		}
		if (el.isContentEditable) {
			el.focus();
			const sel = getSelection();
			sel.selectAllChildren(el);
			document.execCommand('insertText', false, sv);
			return { ok: true, text: what + ' is set to ' + quote(clean(el.innerText, opts.nameMax)) };
		}
		return { ok: false, error: what + ' is not a form field (an input, textarea, select, ' +
			'checkbox, radio button or editable text)' };
	};

	// fileInput: the <input type=file> of a reference, returned by
	// reference (its handle goes to DOM.setFileInputFiles), or an error.
	const fileInput = (opts) => {
		const el = byRef(opts.ref);
		if (!el)
			throw new Error(stale(opts.ref).error);
		if (el.tagName !== 'INPUT' || String(el.type).toLowerCase() !== 'file')
			throw new Error('ref_' + opts.ref + ' (' + label(el, opts.nameMax) + ') is not a file ' +
				'input (<input type=file>)');
		if (el.disabled)
			throw new Error('ref_' + opts.ref + ' is disabled');
		if (!el.multiple && opts.count > 1)
			throw new Error('ref_' + opts.ref + ' takes one file, not ' + opts.count);
		return el;
	};

	return { readPage: wellFormed(readPage), pageText: wellFormed(pageText), find: wellFormed(find),
		locate: wellFormed(locate), formInput: wellFormed(formInput), fileInput };
})();
