// stepfork view: the timeline, the aligned diff and the sweep table made
// interactive. The page reads the same without it; nothing here touches the
// network. Data are inserted with textContent only, never as markup.
(function () {
  'use strict';
  var doc = document;
  doc.documentElement.classList.add('js');
  var data = JSON.parse(doc.getElementById('sf-data').textContent);
  var payloads = null;
  function pay() {
    var e = doc.getElementById('sf-payloads');
    if (!e) return { runs: [], diff: [] }; // still being read
    if (!payloads) payloads = JSON.parse(e.textContent);
    return payloads;
  }
  var ROW = 30;
  // The rows after the first screen follow this script in the document;
  // they are added once the whole document has been read.
  var whenRest = [];
  function onRest(fn) { whenRest.push(fn); }
  doc.addEventListener('DOMContentLoaded', function () {
    var rest = JSON.parse(doc.getElementById('sf-rest').textContent);
    rest.runs.forEach(function (rows, ri) { var into = data.runs[ri].rows; for (var i = 0; i < rows.length; i++) into.push(rows[i]); });
    if (data.diff) { var into = data.diff.steps; for (var i = 0; i < rest.diff.length; i++) into.push(rest.diff[i]); }
    whenRest.forEach(function (fn) { fn(); });
    doc.documentElement.classList.add('sf-complete');
  });
  var detail = doc.getElementById('detail');
  var lists = [];

  function el(tag, cls, text) {
    var e = doc.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function dur(ms) {
    if (ms === undefined || ms === null) return '';
    if (ms < 1000) return ms + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    return Math.floor(ms / 60000) + 'm' + String(Math.floor(ms / 1000) % 60).padStart(2, '0') + 's';
  }
  function status(s) { return el('span', 'status s-' + s, s); }
  var TAG = { tool: 'tool', llm: 'model', node: 'node', state: 'state', decision: 'decision', approval: 'approval',
    param: 'param', marker: 'marker', error: 'error', start: 'start', run: 'end', event: 'event' };
  function failed(r) {
    return r.s === 'error' || r.s === 'blocked' || r.k === 'error' || (r.k === 'run' && r.s === 'failed');
  }
  function meta(r) {
    var parts = [];
    parts.push(r.sts.length > 1 ? 'steps ' + r.sts.join(', ') : 'step ' + r.st);
    if (r.ms !== undefined) parts.push(dur(r.ms));
    if (r.tk) parts.push(r.tk + ' tok');
    if (r.c) parts.push(r.c);
    return parts.join(' · ');
  }

  // ---- JSON shown as a collapsible tree --------------------------------
  function tree(v, key, depth) {
    var label = key === null ? '' : key;
    if (v !== null && typeof v === 'object') {
      var isArr = Array.isArray(v);
      var keys = isArr ? v.map(function (_, i) { return i; }) : Object.keys(v);
      var d = el('details');
      if (depth < 2 || keys.length <= 3) d.open = true;
      var s = el('summary');
      if (label !== '') { s.appendChild(el('span', 'k', label)); s.appendChild(doc.createTextNode(': ')); }
      s.appendChild(doc.createTextNode(isArr ? '[' + keys.length + ']' : '{' + keys.length + '}'));
      d.appendChild(s);
      keys.forEach(function (k) { d.appendChild(tree(v[k], isArr ? '[' + k + ']' : k, depth + 1)); });
      return d;
    }
    var leaf = el('div', 'leaf');
    if (label !== '') { leaf.appendChild(el('span', 'k', label)); leaf.appendChild(doc.createTextNode(': ')); }
    if (typeof v === 'string') leaf.appendChild(el('span', 's', JSON.stringify(v)));
    else if (typeof v === 'number') leaf.appendChild(el('span', 'num', String(v)));
    else leaf.appendChild(el('span', 'lit', String(v)));
    return leaf;
  }
  function jtree(title, v) {
    var box = el('div', 'jtree');
    box.appendChild(el('h4', '', title));
    box.appendChild(tree(v, null, 0));
    return box;
  }

  // ---- the detail panel ---------------------------------------------------
  function openDetail(build) {
    detail.textContent = '';
    var close = el('button', 'close', '×');
    close.setAttribute('aria-label', 'close');
    close.addEventListener('click', closeDetail);
    detail.appendChild(close);
    build(detail);
    detail.hidden = false;
    doc.body.classList.add('has-detail');
  }
  function closeDetail() {
    detail.hidden = true;
    doc.body.classList.remove('has-detail');
  }
  function facts(box, pairs) {
    var dl = el('dl', 'facts');
    pairs.forEach(function (p) {
      if (p[1] === '' || p[1] === undefined || p[1] === null) return;
      var d = el('div');
      d.appendChild(el('dt', '', p[0]));
      var dd = el('dd');
      if (p[1] instanceof Node) dd.appendChild(p[1]); else dd.textContent = String(p[1]);
      d.appendChild(dd);
      dl.appendChild(d);
    });
    box.appendChild(dl);
  }
  function shown(s) {
    var span = el('span', 'val');
    if (s.x) { span.className = 'absent'; span.textContent = '(absent)'; return span; }
    if (s.pre) span.appendChild(doc.createTextNode(s.pre));
    span.appendChild(el('mark', '', s.mid || ''));
    if (s.post) span.appendChild(doc.createTextNode(s.post));
    return span;
  }
  // pathEl is a field path that may wrap after a '.' or before a '[' only,
  // never inside a key (as the markup's path does).
  function pathEl(p) {
    var code = el('code'), parts = String(p).split(/(?<=\.)|(?=\[)/);
    parts.forEach(function (s, i) { if (i) code.appendChild(doc.createElement('wbr')); code.appendChild(doc.createTextNode(s)); });
    return code;
  }
  function changesTable(ch) {
    var t = el('table', 'changes');
    var h = el('tr');
    ['field', 'base', 'variant'].forEach(function (x) { h.appendChild(el('th', '', x)); });
    var th = el('thead'); th.appendChild(h); t.appendChild(th);
    var tb = el('tbody');
    ch.forEach(function (c) {
      var tr = el('tr', 'k-' + c.k);
      var td = el('td'); td.appendChild(pathEl(c.p)); tr.appendChild(td);
      var a = el('td', 'exp'); a.appendChild(shown(c.a)); tr.appendChild(a);
      var b = el('td', 'act'); b.appendChild(shown(c.b)); tr.appendChild(b);
      tb.appendChild(tr);
    });
    t.appendChild(tb);
    return t;
  }

  // ---- a virtual list: only the rows on screen exist ----------------------
  function VList(host, opts) {
    var box = el('div', 'vlist');
    box.tabIndex = 0;
    box.setAttribute('role', 'listbox');
    box.setAttribute('aria-label', opts.label);
    var spacer = el('div', 'spacer');
    box.appendChild(spacer);
    host.appendChild(box);
    var self = { box: box, pos: [], sel: -1, lane: 0 };
    var shownRows = {};
    function draw() {
      var top = box.scrollTop, h = box.clientHeight || 600;
      var first = Math.max(0, Math.floor(top / ROW) - 10), last = Math.min(self.pos.length - 1, Math.ceil((top + h) / ROW) + 10);
      var keep = {};
      for (var i = first; i <= last; i++) {
        keep[i] = true;
        if (!shownRows[i]) {
          var r = el('div', 'vrow');
          r.style.top = (i * ROW) + 'px';
          r.setAttribute('role', 'option');
          r.dataset.pos = i;
          opts.render(self.pos[i], r, i === self.sel ? self.lane : -1, i);
          if (i === self.sel) { r.classList.add('sel'); r.setAttribute('aria-selected', 'true'); }
          spacer.appendChild(r);
          shownRows[i] = r;
        }
      }
      Object.keys(shownRows).forEach(function (k) {
        if (!keep[k]) { spacer.removeChild(shownRows[k]); delete shownRows[k]; }
      });
    }
    self.reset = function (pos) {
      self.pos = pos;
      spacer.style.height = (pos.length * ROW) + 'px';
      Object.keys(shownRows).forEach(function (k) { spacer.removeChild(shownRows[k]); });
      shownRows = {};
      draw();
    };
    self.redraw = function () { self.reset(self.pos); };
    self.select = function (i, lane, show) {
      if (i < 0 || i >= self.pos.length) return;
      self.sel = i; self.lane = lane || 0;
      var y = i * ROW;
      if (y < box.scrollTop) box.scrollTop = y;
      else if (y + ROW > box.scrollTop + box.clientHeight) box.scrollTop = y + ROW - box.clientHeight;
      self.redraw();
      if (show !== false) opts.show(self.pos[i], self.lane);
    };
    box.addEventListener('scroll', draw, { passive: true });
    box.addEventListener('click', function (ev) {
      var r = ev.target.closest('.vrow');
      if (!r) return;
      var lane = ev.target.closest('.lane');
      var i = +r.dataset.pos;
      if (ev.target.closest('.fold') && opts.toggle) { opts.toggle(self.pos[i]); return; }
      self.select(i, lane ? +lane.dataset.lane : 0);
      box.focus({ preventScroll: true });
    });
    box.addEventListener('keydown', function (ev) {
      var k = ev.key, i = self.sel, p = self.pos[i];
      var lanes = p && p.lanes ? p.lanes.length : 0;
      if (k === 'ArrowDown' || k === 'j') self.select(i < 0 ? 0 : Math.min(i + 1, self.pos.length - 1));
      else if (k === 'ArrowUp' || k === 'k') self.select(i < 0 ? 0 : Math.max(i - 1, 0));
      else if (k === 'Home') self.select(0);
      else if (k === 'End') self.select(self.pos.length - 1);
      else if (k === 'PageDown') self.select(Math.min(i + Math.floor(box.clientHeight / ROW), self.pos.length - 1));
      else if (k === 'PageUp') self.select(Math.max(i - Math.floor(box.clientHeight / ROW), 0));
      else if ((k === 'ArrowRight' || k === 'l') && lanes) self.select(i, Math.min(self.lane + 1, lanes - 1));
      else if ((k === 'ArrowLeft' || k === 'h') && lanes) self.select(i, Math.max(self.lane - 1, 0));
      else if ((k === 'ArrowRight' || k === 'l' || k === 'ArrowLeft' || k === 'h' || k === 'Enter') && opts.toggle && p) opts.toggle(p, k);
      else if (k === 'Escape') closeDetail();
      else if (k === 'd' && opts.divergence !== undefined && opts.divergence >= 0) self.select(opts.divergence);
      else return;
      ev.preventDefault();
    });
    lists.push(self);
    return self;
  }

  // ---- a run's timeline ---------------------------------------------------
  function runList(host, ri) {
    var run = data.runs[ri], rows = run.rows, forkStep = run.forkStep;
    var collapsed = {};
    function legendText() { return run.count + ' rows' + (forkStep >= 0 ? ' · blue: served from the recording, orange: the live tail' : '') + ' · select a row for its payload'; }
    var legend = el('p', 'muted legend', legendText());
    host.appendChild(legend);
    var list;
    function positions() {
      var pos = [], skipDepth = -1;
      for (var i = 0; i < rows.length; i++) {
        var r = rows[i];
        if (skipDepth >= 0) { if (r.d > skipDepth) continue; skipDepth = -1; }
        if (r.g && r.k !== 'group') continue; // shown inside its group's row
        var p = { row: i };
        if (r.k === 'group') {
          p.lanes = [];
          for (var j = i + 1; j < rows.length && rows[j].g === r.g; j++) if (rows[j].k !== 'group' && rows[j].d === r.d) p.lanes.push(j);
        }
        pos.push(p);
        if (r.k === 'node' && collapsed[i]) skipDepth = r.d;
      }
      for (var q = 0; q + 1 < pos.length; q++) {
        var a = rows[pos[q].row], b = rows[pos[q + 1].row];
        if (forkStep >= 0 && a.st <= forkStep && b.st > forkStep) pos[q].forkpoint = true;
      }
      return pos;
    }
    function cell(r, cls) {
      var c = el('span', 'cell ' + (cls || ''));
      c.appendChild(el('span', 'tag', TAG[r.k] || r.k));
      c.appendChild(el('span', 'n', r.n));
      if (r.s) c.appendChild(status(r.s));
      if (r.pv) c.appendChild(el('code', 'pv', r.pv));
      if (r.e) c.appendChild(el('span', 'error-text', r.e.length > 90 ? r.e.slice(0, 90) + '…' : r.e));
      if (r.nt) c.appendChild(el('span', 'note', r.nt));
      return c;
    }
    function render(p, div, lane) {
      var r = rows[p.row];
      for (var d = 0; d < r.d; d++) div.appendChild(el('span', 'guide'));
      if (r.x) div.classList.add('x-' + r.x);
      if (p.forkpoint) { div.classList.add('forkpoint'); div.title = 'fork point: the rows below ran in the live tail'; }
      if (r.k === 'node') {
        div.classList.add('node');
        div.appendChild(el('span', 'fold', collapsed[p.row] ? '▸' : '▾'));
        div.appendChild(cell(r));
        div.appendChild(el('span', 'meta', meta(r)));
      } else if (p.lanes) {
        div.appendChild(el('span', 'tag', '‖'));
        p.lanes.forEach(function (j, li) {
          var m = rows[j];
          var c = cell(m, 'lane' + (failed(m) ? ' failed' : '') + (li === lane ? ' sel' : ''));
          c.dataset.lane = li;
          c.title = meta(m);
          div.appendChild(c);
        });
      } else {
        if (failed(r)) div.classList.add('failed');
        div.appendChild(el('span', 'fold', ''));
        div.appendChild(cell(r));
        div.appendChild(el('span', 'meta', meta(r)));
      }
    }
    function show(p, lane) {
      var idx = p.lanes ? p.lanes[lane] : p.row, r = rows[idx];
      openDetail(function (box) {
        box.appendChild(el('h3', '', (TAG[r.k] || r.k) + ' ' + r.n));
        var side = r.x === 'prefix' ? 'served from the recording' : r.x === 'tail' ? 'ran in the live tail' : '';
        facts(box, [['status', r.s ? status(r.s) : ''], ['steps', r.sts.join(', ')], ['duration', dur(r.ms)],
          ['tokens', r.tk || ''], ['cost', r.c || ''], ['fork', side], ['note', r.nt || '']]);
        if (r.e) box.appendChild(el('p', 'error-text', r.e));
        var ids = el('div', 'ids');
        ids.appendChild(el('h4', '', 'events'));
        r.ids.forEach(function (id, i) { ids.appendChild(el('code', '', 'step ' + r.sts[i] + ' · ' + id)); });
        box.appendChild(ids);
        var pl = (pay().runs[ri] || [])[idx] || [null, null];
        if (pl[0] !== null && pl[0] !== undefined) box.appendChild(jtree(r.k === 'state' ? 'before' : 'input', pl[0]));
        if (pl[1] !== null && pl[1] !== undefined) box.appendChild(jtree(r.k === 'state' ? 'after' : 'output', pl[1]));
      });
    }
    function toggle(p, key) {
      var r = rows[p.row];
      if (r.k !== 'node') return;
      if (key === 'ArrowLeft' || key === 'h') collapsed[p.row] = true;
      else if (key === 'ArrowRight' || key === 'l') delete collapsed[p.row];
      else if (collapsed[p.row]) delete collapsed[p.row]; else collapsed[p.row] = true;
      var sel = list.pos[list.sel];
      var keepRow = sel ? sel.row : p.row;
      list.reset(positions());
      for (var i = 0; i < list.pos.length; i++) if (list.pos[i].row === keepRow) { list.sel = i; break; }
      list.redraw();
    }
    list = VList(host, { label: 'timeline', render: render, show: show, toggle: toggle });
    list.reset(positions());
    if (run.count > rows.length) onRest(function () { legend.textContent = legendText(); list.reset(positions()); });
    // rowOf is the position showing row (a concurrent call's group row,
    // with the call's lane), unfolding the nodes that hide it; -1 for none.
    list.rowOf = function (row) {
      if (row < 0 || row >= rows.length) return -1;
      var changed = false;
      for (var d = rows[row].d, i = row - 1; i >= 0 && d > 0; i--) {
        if (rows[i].k === 'node' && rows[i].d < d) { if (collapsed[i]) { delete collapsed[i]; changed = true; } d = rows[i].d; }
      }
      if (changed) list.reset(positions());
      for (var j = 0; j < list.pos.length; j++) {
        var p = list.pos[j];
        if (p.row === row) return { pos: j, lane: 0 };
        if (p.lanes && p.lanes.indexOf(row) >= 0) return { pos: j, lane: p.lanes.indexOf(row) };
      }
      return -1;
    };
    return list;
  }

  // ---- the aligned steps of two runs ---------------------------------------
  var MARK = { added: '+', removed: '−', changed: '~', unchanged: '=' };
  function diffList(host) {
    var steps = data.diff.steps, div = data.diff.div;
    host.appendChild(el('p', 'muted legend', data.diff.count + ' aligned steps · base on the left, variant on the right' + (div >= 0 ? ' · press d for the first divergence' : '')));
    function half(s) {
      var h = el('span', 'half');
      if (!s) { h.appendChild(el('span', 'absent', '—')); return h; }
      h.appendChild(el('span', 'tag', s.t));
      h.appendChild(doc.createTextNode(' '));
      h.appendChild(el('span', 'n', s.n));
      h.appendChild(el('span', 'muted', ' ' + s.w + ' '));
      if (s.s) h.appendChild(status(s.s));
      return h;
    }
    function render(p, d) {
      var s = steps[p.row];
      d.classList.add('k-' + s.k);
      if (s.div) d.classList.add('div');
      d.id = 'vd-' + s.i;
      d.appendChild(el('span', 'idx', '#' + s.i));
      d.appendChild(el('span', 'mark', MARK[s.k]));
      d.appendChild(half(s.b));
      d.appendChild(half(s.v));
      var end = el('span', 'end');
      if (s.div) end.appendChild(el('span', 'badge bad', 'first divergence'));
      if (s.why) end.appendChild(el('span', 'badge why', s.why));
      if (s.ch) end.appendChild(el('span', 'meta', ' ' + s.ch.length + ' field(s)'));
      d.appendChild(end);
    }
    function show(p) {
      var s = steps[p.row];
      openDetail(function (box) {
        box.appendChild(el('h3', '', '#' + s.i + ' ' + s.t + ' ' + s.n + ' (' + s.k + ')'));
        if (s.div) box.appendChild(el('p', 'badge bad', 'first divergence'));
        function sideFacts(name, x) {
          if (!x) return [name, '—'];
          return [name, x.w + ' · ' + x.id + (x.rid ? ' → ' + x.rid : '')];
        }
        facts(box, [sideFacts('base', s.b), sideFacts('variant', s.v)]);
        if (s.ch) box.appendChild(changesTable(s.ch));
        var pl = (pay().diff || [])[p.row] || [null, null];
        if (pl[0] !== null && pl[0] !== undefined) box.appendChild(jtree('base', pl[0]));
        if (pl[1] !== null && pl[1] !== undefined) box.appendChild(jtree('variant', pl[1]));
      });
    }
    var list = VList(host, { label: 'aligned steps', render: render, show: show, divergence: div });
    function positions() {
      var pos = [];
      for (var i = 0; i < steps.length; i++) pos.push({ row: i });
      return pos;
    }
    list.reset(positions());
    if (data.diff.count > steps.length) onRest(function () { list.reset(positions()); });
    list.rowOf = function (row) { return row >= 0 && row < steps.length ? { pos: row, lane: 0 } : -1; };
    return list;
  }

  // ---- the sweep table -----------------------------------------------------
  function sortable(table) {
    var ths = table.querySelectorAll('th[data-sort]');
    ths.forEach(function (th, col) {
      function sort() {
        var dir = th.getAttribute('aria-sort') === 'ascending' ? -1 : 1;
        ths.forEach(function (o) { o.removeAttribute('aria-sort'); });
        th.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending');
        var tb = table.tBodies[0], rows = Array.prototype.slice.call(tb.rows);
        rows.sort(function (a, b) {
          var x = a.cells[col], y = b.cells[col];
          if (th.dataset.sort === 'num') return dir * ((+x.dataset.v) - (+y.dataset.v));
          return dir * x.textContent.trim().localeCompare(y.textContent.trim());
        });
        rows.forEach(function (r) { tb.appendChild(r); });
      }
      th.addEventListener('click', sort);
      th.addEventListener('keydown', function (ev) { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); sort(); } });
    });
    var tb = table.tBodies[0];
    Array.prototype.forEach.call(tb.rows, function (r) { r.tabIndex = 0; });
    tb.addEventListener('keydown', function (ev) {
      var r = ev.target.closest('tr');
      if (!r) return;
      var next = null;
      var step = null;
      if (ev.key === 'ArrowDown' || ev.key === 'j') step = 'nextElementSibling';
      else if (ev.key === 'ArrowUp' || ev.key === 'k') step = 'previousElementSibling';
      else if (ev.key === 'Enter') { var a = r.querySelector('a'); if (a) a.click(); ev.preventDefault(); return; }
      else return;
      ev.preventDefault();
      next = r[step];
      while (next && next.classList.contains('filtered')) next = next[step];
      if (next) next.focus();
    });
    tb.addEventListener('focusin', function (ev) {
      Array.prototype.forEach.call(tb.rows, function (r) { r.classList.remove('sel'); });
      var r = ev.target.closest('tr');
      if (r) r.classList.add('sel');
    });
  }

  // ---- the sweep's filters -------------------------------------------------
  function sweepFilters() {
    var table = doc.getElementById('sweep-table');
    var text = doc.getElementById('sweep-filter'), st = doc.getElementById('sweep-status'), dv = doc.getElementById('sweep-diverged');
    var shown = doc.getElementById('sweep-shown');
    if (!table || !text) return;
    function apply() {
      var q = text.value.trim().toLowerCase(), want = st.value, only = dv.checked, n = 0, rows = table.tBodies[0].rows;
      for (var i = 0; i < rows.length; i++) {
        var r = rows[i];
        var ok = (!q || r.textContent.toLowerCase().indexOf(q) >= 0) && (!want || r.dataset.status === want) && (!only || r.dataset.diverged === 'yes');
        r.classList.toggle('filtered', !ok);
        if (ok) n++;
      }
      shown.textContent = n === rows.length ? '' : n + ' of ' + rows.length + ' variants shown';
    }
    text.addEventListener('input', apply);
    st.addEventListener('change', apply);
    dv.addEventListener('change', apply);
    apply();
  }

  // ---- wiring ---------------------------------------------------------------
  var diffListRef = null;
  doc.querySelectorAll('.timeline[data-run]').forEach(function (host) { runList(host, +host.dataset.run); });
  var mainDiff = doc.querySelector('main > .diff [data-diff]');
  if (mainDiff && data.diff) diffListRef = diffList(mainDiff);
  // Diffs embedded in a sweep page keep their static table (their steps are
  // not in the page's data); JavaScript only shows them.
  doc.querySelectorAll('.embedded .static').forEach(function (s) { s.classList.remove('static'); });
  doc.querySelectorAll('table.sortable').forEach(sortable);
  sweepFilters();
  if (performance.mark) performance.mark('sf-first-rows');
  onRest(function () { if (performance.mark) performance.mark('sf-all-rows'); });
  function follow() {
    var id = decodeURIComponent(location.hash.slice(1));
    if (!id) return;
    var t = doc.getElementById(id);
    if (t && t.tagName === 'DETAILS') { t.open = true; t.scrollIntoView(); return; }
    var m = /^d-(\d+)$/.exec(id);
    if (m && diffListRef) { diffListRef.select(+m[1]); diffListRef.box.scrollIntoView({ block: 'center' }); diffListRef.box.focus({ preventScroll: true }); return; }
    m = /^row-(\d+)$/.exec(id);
    if (m) {
      for (var i = 0; i < lists.length; i++) {
        var l = lists[i], p = l.rowOf && l !== diffListRef ? l.rowOf(+m[1]) : -1;
        if (p !== -1) { l.select(p.pos, p.lane); l.box.scrollIntoView({ block: 'center' }); l.box.focus({ preventScroll: true }); return; }
      }
    }
  }
  window.addEventListener('hashchange', follow);
  follow();
  onRest(follow);
  doc.addEventListener('keydown', function (ev) {
    if (ev.key === 'Escape') { closeDetail(); return; }
    // d goes to the first divergence wherever the focus is, except in a
    // field the reader types into (and once a list has handled it).
    if (ev.key !== 'd' || ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    var t = ev.target, tag = t && t.tagName;
    if (tag === 'INPUT' || tag === 'TEXTAREA' || tag === 'SELECT' || (t && t.isContentEditable)) return;
    if (!diffListRef || !data.diff || data.diff.div < 0) return;
    ev.preventDefault();
    diffListRef.select(data.diff.div);
    diffListRef.box.scrollIntoView({ block: 'center' });
    diffListRef.box.focus({ preventScroll: true });
  });
  window.stepforkView = { lists: lists, diff: diffListRef }; // for tests and the console
})();
