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
// {ok: false, error}.
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

	const clean = (s, max) => {
		s = String(s == null ? '' : s).replace(/\s+/g, ' ').trim();
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
	const rendered = (el) => {
		if (!el.getClientRects().length)
			return false;
		const st = getComputedStyle(el);
		return st.visibility !== 'hidden' && st.visibility !== 'collapse';
	};
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
			if (!rendered(el) && el.tagName !== 'OPTION')
				return;
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

	return { readPage, pageText };
})();
