// stepfork explore: pick a fork point, change what the run recorded, run
// the test's agent on it, and take the test code home. Every value arrives
// redacted from the test process; it is inserted with textContent only,
// never as markup. State changes are POSTs carrying the session's token.
(function () {
  'use strict';
  var doc = document;
  var token = location.pathname.split('/')[2] || '';
  function $(id) { return doc.getElementById(id); }
  function el(tag, cls, text) {
    var e = doc.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function answer(r) {
    return r.text().then(function (t) {
      var j = {};
      try { j = t ? JSON.parse(t) : {}; } catch (e) { j = { error: t || r.statusText }; }
      if (!r.ok) throw new Error(j.error || r.statusText);
      return j;
    });
  }
  function get(path) { return fetch(path, { cache: 'no-store', credentials: 'same-origin' }).then(answer); }
  function post(path, body) {
    return fetch(path, { method: 'POST', credentials: 'same-origin', cache: 'no-store',
      headers: { 'Content-Type': 'application/json', 'X-Stepfork-Token': token },
      body: JSON.stringify(body || {}) }).then(answer);
  }
  function status(s) { return el('span', 'status s-' + s, s); }

  var state = { points: [], step: null, choices: null, items: [], runs: [], running: false,
    current: null, selected: {}, ended: false, code: null };

  // ---- fork points ------------------------------------------------------
  var MAXPOINTS = 500;
  function renderPoints() {
    var list = $('points');
    list.textContent = '';
    var f = $('point-filter').value.trim().toLowerCase();
    var shown = 0, matched = 0;
    state.points.forEach(function (p) {
      var text = ('step ' + p.step + ' ' + p.kind + ' ' + (p.name || '') + ' ' + (p.node || '') + ' ' + p.description + (p.failure ? ' failure' : '')).toLowerCase();
      if (f && text.indexOf(f) < 0) return;
      matched++;
      if (shown >= MAXPOINTS) return;
      shown++;
      var li = el('li', 'point' + (p.step === state.step ? ' sel' : ''));
      li.dataset.step = p.step;
      li.tabIndex = 0;
      li.appendChild(el('span', 'st', 'step ' + p.step));
      li.appendChild(el('span', 'pk', p.kind.replace('_', ' ')));
      var d = el('span', 'pd', p.description);
      li.appendChild(d);
      if (p.failure) li.appendChild(el('span', 'badge failure', 'failure'));
      li.addEventListener('click', function () { pick(p.step); });
      li.addEventListener('keydown', function (ev) { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); pick(p.step); } });
      list.appendChild(li);
    });
    var more = $('points-more');
    more.hidden = matched <= shown;
    more.textContent = (matched - shown) + ' more point(s): filter to narrow the list.';
  }
  $('point-filter').addEventListener('input', renderPoints);

  function pick(step) {
    state.step = step;
    renderPoints();
    $('point-title').textContent = 'loading…';
    $('choices').textContent = '';
    delete $('choices').dataset.step;
    state.items = [];
    refreshRun();
    get('api/choices?step=' + step).then(function (c) {
      state.choices = c;
      renderChoices(c);
    }).catch(function (e) { $('point-title').textContent = e.message; });
  }

  // ---- the changes at a point ------------------------------------------
  // Each item is {fs, on(), valid(), spec()}.
  function jsonEditor(text) {
    var wrap = el('div', 'editor');
    var ta = el('textarea', 'json');
    ta.value = text;
    ta.spellcheck = false;
    ta.setAttribute('aria-label', 'JSON value');
    var msg = el('div', 'check');
    wrap.appendChild(ta);
    wrap.appendChild(msg);
    function check() {
      try {
        JSON.parse(ta.value);
        ta.classList.remove('invalid');
        msg.className = 'check good';
        msg.textContent = 'valid JSON';
        return true;
      } catch (e) {
        ta.classList.add('invalid');
        msg.className = 'check bad';
        msg.textContent = 'not valid JSON: ' + e.message;
        return false;
      }
    }
    ta.addEventListener('input', function () { check(); refreshRun(); });
    check();
    return { node: wrap, ta: ta, valid: check };
  }

  function fieldset(kind, title, subtitle) {
    var fs = el('div', 'choice');
    fs.dataset.kind = kind;
    var head = el('div', 'head');
    var lab = el('label');
    var cb = el('input');
    cb.type = 'checkbox';
    cb.className = 'toggle';
    lab.appendChild(cb);
    lab.appendChild(el('span', 'title', title));
    head.appendChild(lab);
    if (subtitle) head.appendChild(el('span', 'muted sub', subtitle));
    fs.appendChild(head);
    var body = el('div', 'body');
    body.hidden = true;
    fs.appendChild(body);
    cb.addEventListener('change', function () {
      body.hidden = !cb.checked;
      fs.classList.toggle('on', cb.checked);
      refreshRun();
    });
    return { fs: fs, body: body, cb: cb };
  }

  function outputItem(o) {
    var what = o.kind === 'tool_result' ? 'tool result' : 'model response';
    var f = fieldset(o.kind, what + ' of \u2018' + o.name + '\u2019 call ' + o.occurrence + ' (step ' + o.step + ')', 'resolves as: ' + o.resolved);
    f.fs.dataset.name = o.name;
    if (o.note) f.body.appendChild(el('div', 'note', o.note));
    var ed = jsonEditor(o.value);
    f.body.appendChild(ed.node);
    return { fs: f.fs, on: function () { return f.cb.checked; }, valid: ed.valid,
      spec: function () { return { kind: o.kind, name: o.name, occurrence: o.occurrence, value: ed.ta.value }; } };
  }

  function promptItem(p) {
    var f = fieldset('prompt', 'prompt of ' + (p.target === '*' ? 'every model call' : '\u2018' + p.target + '\u2019'),
      p.what + ' · ' + p.calls + ' model call(s) in the tail' + (p.has_prompt ? '' : ' · no system prompt recorded'));
    f.fs.dataset.target = p.target;
    var op = el('select', 'op');
    [['set', 'replace the whole prompt'], ['append', 'append to it'], ['prepend', 'prepend to it'], ['replace', 'replace a passage']].forEach(function (o) {
      var opt = el('option', '', o[1]);
      opt.value = o[0];
      op.appendChild(opt);
    });
    var opLab = el('label', '', 'edit: ');
    opLab.appendChild(op);
    f.body.appendChild(opLab);
    var recorded = el('div', 'recorded', p.prompt);
    var whole = el('textarea', 'prompt-text');
    whole.value = p.prompt;
    whole.setAttribute('aria-label', 'the new prompt');
    var passage = el('input', 'passage');
    passage.type = 'text';
    passage.placeholder = 'the passage of the recorded prompt to replace';
    passage.setAttribute('aria-label', 'passage');
    var text = el('textarea', 'edit-text');
    text.setAttribute('aria-label', 'text');
    var check = el('div', 'check');
    var recLab = el('div', 'muted', 'recorded prompt:');
    var pasLab = el('div', 'muted', 'passage:');
    var txtLab = el('div', 'muted', 'text:');
    [recLab, recorded, whole, pasLab, passage, txtLab, text, check].forEach(function (n) { f.body.appendChild(n); });
    function layout() {
      var o = op.value;
      whole.hidden = o !== 'set';
      recLab.hidden = recorded.hidden = o === 'set';
      pasLab.hidden = passage.hidden = o !== 'replace';
      txtLab.hidden = text.hidden = o === 'set';
      txtLab.textContent = o === 'replace' ? 'replacement:' : 'text to ' + o + ':';
      valid();
      refreshRun();
    }
    function valid() {
      check.textContent = '';
      check.className = 'check';
      passage.classList.remove('invalid');
      if (op.value !== 'replace') return true;
      if (!passage.value) {
        passage.classList.add('invalid');
        check.className = 'check bad';
        check.textContent = 'name the passage to replace';
        return false;
      }
      if (p.prompt.indexOf(passage.value) < 0) {
        check.className = 'check bad';
        check.textContent = 'the recorded prompt does not contain this passage: the change would be unused';
      } else {
        check.className = 'check good';
        check.textContent = 'the passage is in the recorded prompt';
      }
      return true;
    }
    op.addEventListener('change', layout);
    [passage, text, whole].forEach(function (n) { n.addEventListener('input', function () { valid(); refreshRun(); }); });
    layout();
    return { fs: f.fs, on: function () { return f.cb.checked; }, valid: valid,
      spec: function () {
        var o = op.value;
        if (o === 'set') return { kind: 'prompt', target: p.target, op: 'set', text: whole.value };
        if (o === 'replace') return { kind: 'prompt', target: p.target, op: 'replace', passage: passage.value, text: text.value };
        return { kind: 'prompt', target: p.target, op: o, text: text.value };
      } };
  }

  function modelItem(p) {
    var f = fieldset('model', 'model of ' + (p.target === '*' ? 'every model call' : '\u2018' + p.target + '\u2019'), 'recorded: ' + p.model);
    f.fs.dataset.target = p.target;
    var inp = el('input', 'model');
    inp.type = 'text';
    inp.value = p.model;
    inp.setAttribute('aria-label', 'model');
    f.body.appendChild(inp);
    return { fs: f.fs, on: function () { return f.cb.checked; }, valid: function () { return inp.value !== ''; },
      spec: function () { return { kind: 'model', target: p.target, model: inp.value }; } };
  }

  function temperatureItem(p) {
    var rec = p.temperature === undefined || p.temperature === null ? 'none recorded' : String(p.temperature);
    var f = fieldset('temperature', 'temperature of ' + (p.target === '*' ? 'every model call' : '\u2018' + p.target + '\u2019'), 'recorded: ' + rec);
    f.fs.dataset.target = p.target;
    var inp = el('input', 'temperature');
    inp.type = 'number';
    inp.min = '0';
    inp.max = '2';
    inp.step = '0.1';
    inp.value = p.temperature === undefined || p.temperature === null ? '0.7' : String(p.temperature);
    inp.setAttribute('aria-label', 'temperature');
    f.body.appendChild(inp);
    function valid() {
      var v = Number(inp.value);
      var ok = inp.value !== '' && v >= 0 && v <= 2;
      inp.classList.toggle('invalid', !ok);
      return ok;
    }
    inp.addEventListener('input', function () { valid(); refreshRun(); });
    return { fs: f.fs, on: function () { return f.cb.checked; }, valid: valid,
      spec: function () { return { kind: 'temperature', target: p.target, temperature: Number(inp.value) }; } };
  }

  function valueItem(kind, v, title, named) {
    var f = fieldset(kind, title, v.step ? 'recorded at step ' + v.step : '');
    var name = null;
    if (named) {
      name = el('input', 'name');
      name.type = 'text';
      name.placeholder = 'name';
      name.setAttribute('aria-label', 'name');
      f.body.appendChild(name);
    } else {
      f.fs.dataset.name = v.name;
    }
    var once = null;
    if (kind === 'decision') {
      var lab = el('label');
      once = el('input');
      once.type = 'checkbox';
      lab.appendChild(once);
      lab.appendChild(el('span', '', 'only the first time'));
      f.body.appendChild(lab);
    }
    var ed = jsonEditor(v.value);
    f.body.appendChild(ed.node);
    return { fs: f.fs, on: function () { return f.cb.checked; },
      valid: function () { return ed.valid() && (!name || name.value !== ''); },
      spec: function () {
        var s = { kind: kind, name: name ? name.value : v.name, value: ed.ta.value };
        if (once && once.checked) s.once = true;
        return s;
      } };
  }

  function stateItem(v) {
    var f = fieldset('state', 'state \u2018' + v.name + '\u2019', 'what replay.Read returns in the tail (recorded at step ' + v.step + ')');
    f.fs.dataset.name = v.name;
    var lab = el('label');
    var del = el('input');
    del.type = 'checkbox';
    lab.appendChild(del);
    lab.appendChild(el('span', '', 'delete it instead'));
    f.body.appendChild(lab);
    var ed = jsonEditor(v.value);
    f.body.appendChild(ed.node);
    return { fs: f.fs, on: function () { return f.cb.checked; }, valid: function () { return del.checked || ed.valid(); },
      spec: function () {
        if (del.checked) return { kind: 'state', delete: [v.name] };
        var set = {};
        set[v.name] = ed.ta.value;
        return { kind: 'state', set: set };
      } };
  }

  function otherOutputItem() {
    var f = fieldset('other_output', 'the result of another call', 'a tool or model call by name and occurrence, e.g. one the changed tail makes for the first time');
    var kind = el('select', 'kind');
    [['tool_result', 'tool result'], ['llm_response', 'model response']].forEach(function (o) { var x = el('option', '', o[1]); x.value = o[0]; kind.appendChild(x); });
    var name = el('input', 'name');
    name.type = 'text';
    name.placeholder = 'tool name or model label';
    var occ = el('input', 'occurrence');
    occ.type = 'number';
    occ.min = '0';
    occ.value = '1';
    var fresh = el('input');
    fresh.type = 'checkbox';
    fresh.checked = true;
    var lab = el('label');
    lab.appendChild(fresh);
    lab.appendChild(el('span', '', 'new in the tail (fork.NewInTail)'));
    [kind, name, el('span', 'muted', 'call'), occ, lab].forEach(function (n) { f.body.appendChild(n); });
    var ed = jsonEditor('{}');
    f.body.appendChild(ed.node);
    name.addEventListener('input', refreshRun);
    return { fs: f.fs, on: function () { return f.cb.checked; }, valid: function () { return ed.valid() && name.value !== ''; },
      spec: function () { return { kind: kind.value, name: name.value, occurrence: Number(occ.value) || 0, new_in_tail: fresh.checked, value: ed.ta.value }; } };
  }

  function group(box, title, items) {
    if (!items.length) return;
    box.appendChild(el('h3', 'choice-group', title));
    items.forEach(function (it) { box.appendChild(it.fs); state.items.push(it); });
  }

  function renderChoices(c) {
    var box = $('choices');
    box.textContent = '';
    state.items = [];
    var p = c.point;
    if (p.step !== state.step) return; // another point was picked meanwhile
    $('point-title').textContent = 'at step ' + p.step + ': ' + p.description + ' — ' + c.code;
    var tools = c.outputs.filter(function (o) { return o.kind === 'tool_result'; }).map(outputItem);
    var models = c.outputs.filter(function (o) { return o.kind === 'llm_response'; }).map(outputItem);
    group(box, 'Tool results', tools);
    group(box, 'Model responses', models);
    if (c.more) box.appendChild(el('p', 'muted', c.more + ' more call(s) in the tail: change them with "the result of another call".'));
    group(box, 'Prompts', c.prompts.map(promptItem));
    group(box, 'Models', c.prompts.map(modelItem));
    group(box, 'Temperatures', c.prompts.map(temperatureItem));
    group(box, 'Decisions', c.decisions.map(function (d) { return valueItem('decision', d, 'decision \u2018' + d.name + '\u2019'); }));
    group(box, 'Parameters', c.params.map(function (d) { return valueItem('param', d, 'parameter \u2018' + d.name + '\u2019'); }));
    group(box, 'Human responses', c.approvals.map(function (d) { return valueItem('human_response', d, 'answer to \u2018' + d.name + '\u2019'); }));
    group(box, 'State', c.state.map(stateItem));
    group(box, 'Anything else', [
      otherOutputItem(),
      valueItem('human_response', { value: 'true' }, 'an answer to an approval', true),
      valueItem('decision', { value: '""' }, 'another decision', true),
      valueItem('param', { value: '0' }, 'another parameter', true)]);
    // The policy: the tools of the run, those of the tail first.
    var allow = $('allow-tools');
    var was = {};
    [].forEach.call(doc.querySelectorAll('.allow-tool'), function (cb) { was[cb.value] = cb.checked; });
    allow.textContent = '';
    c.tools.forEach(function (t) {
      var lab = el('label');
      var cb = el('input');
      cb.type = 'checkbox';
      cb.value = t;
      cb.className = 'allow-tool';
      cb.checked = !!was[t];
      cb.addEventListener('change', policyChanged);
      lab.appendChild(cb);
      lab.appendChild(el('code', '', t));
      allow.appendChild(lab);
    });
    $('policy').hidden = false;
    box.dataset.step = p.step;
    refreshRun();
  }

  function otherTools() {
    return $('allow-other').value.split(',').map(function (s) { return s.trim(); }).filter(function (s) { return s; });
  }
  $('allow-other').addEventListener('input', policyChanged);

  function policyChanged() {
    var mode = doc.querySelector('input[name=policy]:checked').value;
    var any = otherTools().length > 0 || [].some.call(doc.querySelectorAll('.allow-tool'), function (cb) { return cb.checked; });
    if (any && mode !== 'allow') doc.querySelector('input[name=policy][value=allow]').checked = true;
    $('allow-warning').hidden = !(any || mode === 'allow');
    refreshRun();
  }
  [].forEach.call(doc.querySelectorAll('input[name=policy]'), function (r) { r.addEventListener('change', policyChanged); });

  function policy() {
    var mode = doc.querySelector('input[name=policy]:checked').value;
    var p = { memoize: $('memoize').checked };
    if (mode === 'block') p.block = true;
    if (mode === 'allow') {
      p.allow = [].filter.call(doc.querySelectorAll('.allow-tool'), function (cb) { return cb.checked; }).map(function (cb) { return cb.value; });
      otherTools().forEach(function (t) { if (p.allow.indexOf(t) < 0) p.allow.push(t); });
    }
    return p;
  }

  function refreshRun() {
    var bad = state.items.filter(function (it) { return it.on() && !it.valid(); }).length;
    var btn = $('run-btn');
    btn.disabled = state.ended || state.running || state.step === null || bad > 0;
    if (bad) $('run-msg').textContent = bad + ' change(s) to fix before running';
    else if (!state.running && $('run-msg').dataset.sticky !== '1') $('run-msg').textContent = '';
  }

  $('run-btn').addEventListener('click', function () {
    var changes = state.items.filter(function (it) { return it.on(); }).map(function (it) { return it.spec(); });
    var msg = $('run-msg');
    msg.dataset.sticky = '';
    msg.textContent = 'starting…';
    post('api/run', { step: state.step, changes: changes, policy: policy() }).then(function (r) {
      state.current = r.id;
      state.running = true;
      msg.textContent = 'run ' + r.id + ' is running…';
      refreshRun();
      refreshRuns();
    }).catch(function (e) {
      msg.dataset.sticky = '1';
      msg.textContent = e.message;
    });
  });
  $('cancel-btn').addEventListener('click', function () {
    post('api/cancel').then(function () { $('run-msg').textContent = 'canceling…'; }).catch(function (e) { $('run-msg').textContent = e.message; });
  });

  // ---- the runs --------------------------------------------------------
  var polling = false;
  function refreshRuns() {
    if (polling) return;
    polling = true;
    get('api/runs').then(function (runs) {
      polling = false;
      var wasRunning = state.running;
      state.runs = runs;
      state.running = runs.some(function (r) { return r.state === 'running'; });
      renderRuns();
      $('cancel-btn').hidden = !state.running;
      refreshRun();
      if (state.running) {
        setTimeout(refreshRuns, 250);
      } else if (wasRunning) {
        var r = runs[runs.length - 1];
        var msg = $('run-msg');
        msg.dataset.sticky = '1';
        msg.textContent = 'run ' + r.id + ': ' + (r.status || r.state) + (r.error && r.state !== 'done' ? ' — ' + r.error : '');
        if (r.state === 'done' || r.state === 'canceled') showRun(r.id);
      }
    }).catch(function (e) {
      polling = false;
      if (!state.ended) $('run-msg').textContent = e.message;
    });
  }

  function renderRuns() {
    var tb = $('runs').tBodies[0];
    tb.textContent = '';
    $('runs-empty').hidden = state.runs.length > 0;
    state.runs.forEach(function (r) {
      var tr = el('tr', r.id === state.current ? 'cur' : '');
      tr.dataset.id = r.id;
      var sel = el('input');
      sel.type = 'checkbox';
      sel.className = 'pick';
      sel.disabled = !r.status;
      sel.checked = !!state.selected[r.id];
      sel.setAttribute('aria-label', 'compare run ' + r.id);
      sel.addEventListener('change', function () { state.selected[r.id] = sel.checked; refreshCompare(); });
      var td = el('td');
      td.appendChild(sel);
      tr.appendChild(td);
      tr.appendChild(el('td', '', r.id));
      tr.appendChild(el('td', '', r.point));
      var ch = el('td', 'chg');
      if (!r.changes.length) ch.appendChild(el('div', 'muted', 'none (a null fork)'));
      r.changes.forEach(function (c) { ch.appendChild(el('div', '', c)); });
      ch.appendChild(el('div', 'muted', r.policy));
      tr.appendChild(ch);
      var st = el('td', 'st');
      if (r.state === 'running') st.appendChild(status('running'));
      else if (r.status) {
        st.appendChild(status(r.base_status));
        st.appendChild(doc.createTextNode(' → '));
        st.appendChild(status(r.status));
      } else st.appendChild(status(r.state));
      if (r.error && r.state !== 'running') st.appendChild(el('div', 'error-text', r.error));
      (r.held || []).forEach(function (h) { st.appendChild(el('div', 'note', 'held back: ' + h)); });
      (r.unused || []).forEach(function (u) { st.appendChild(el('div', 'note', 'unused: ' + u)); });
      tr.appendChild(st);
      tr.appendChild(el('td', 'div', r.divergence || ''));
      tr.appendChild(el('td', '', r.status ? r.cost + ' · ' + r.tokens + ' tok' : ''));
      tr.appendChild(el('td', '', r.status ? r.live_model_calls + ' model, ' + r.live_tool_calls + ' tool; ' + r.served + ' served' : ''));
      tr.appendChild(el('td', '', r.seconds.toFixed(1) + ' s'));
      var act = el('td');
      if (r.state === 'running') {
        var c = el('button', 'btn small', 'Cancel');
        c.addEventListener('click', function () { $('cancel-btn').click(); });
        act.appendChild(c);
      } else if (r.status) {
        var open = el('button', 'btn small open', 'Open');
        open.addEventListener('click', function () { showRun(r.id); });
        act.appendChild(open);
      }
      tr.appendChild(act);
      tb.appendChild(tr);
    });
    refreshCompare();
  }

  function selectedIDs() {
    return state.runs.filter(function (r) { return state.selected[r.id] && r.status; }).map(function (r) { return r.id; });
  }
  function refreshCompare() {
    var ids = selectedIDs();
    $('compare-btn').disabled = ids.length < 1;
    var pair = $('pair-link');
    pair.hidden = ids.length !== 2;
    if (ids.length === 2) pair.textContent = 'diff of run ' + ids[0] + ' → run ' + ids[1];
  }
  $('compare-btn').addEventListener('click', function () {
    $('compare-card').hidden = false;
    $('compare-frame').src = 'compare?ids=' + selectedIDs().join(',');
    $('compare-card').scrollIntoView();
  });
  $('pair-link').addEventListener('click', function (ev) {
    ev.preventDefault();
    var ids = selectedIDs();
    $('compare-card').hidden = false;
    $('compare-frame').src = 'pair/' + ids[0] + '/' + ids[1];
  });

  function showRun(id) {
    state.current = id;
    renderRuns();
    $('run-card').hidden = false;
    $('run-title').textContent = 'Run ' + id;
    $('save-msg').textContent = '';
    $('code-msg').textContent = '';
    var r = state.runs.filter(function (x) { return x.id === id; })[0];
    if (r && r.saved) $('save-msg').textContent = 'saved: ' + r.saved;
    if (r && r.wrote) $('code-msg').textContent = 'written: ' + r.wrote;
    $('run-frame').src = 'run/' + id;
    $('code-snippet').textContent = 'loading…';
    state.code = null;
    get('api/code/' + id).then(function (c) {
      state.code = c;
      $('code-snippet').textContent = c.snippet;
      $('code-imports').textContent = 'imports: ' + c.imports.join(', ');
      var w = $('write-btn');
      w.disabled = !c.file;
      w.title = c.file ? 'write ' + c.file_name + ' next to the test (never over a file)' : c.no_file;
      $('file-summary').textContent = c.file ? 'The test file ' + c.file_name + ' (' + c.func + ')' : 'No test file: ' + c.no_file;
      $('code-file').textContent = c.file || '';
    }).catch(function (e) { $('code-snippet').textContent = e.message; });
  }

  $('copy-btn').addEventListener('click', function () {
    if (!state.code) return;
    var text = state.code.snippet, msg = $('code-msg');
    function fallback() {
      var ta = el('textarea');
      ta.value = text;
      doc.body.appendChild(ta);
      ta.select();
      var ok = false;
      try { ok = doc.execCommand('copy'); } catch (e) { ok = false; }
      doc.body.removeChild(ta);
      msg.textContent = ok ? 'copied' : 'select the code and copy it';
    }
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(function () { msg.textContent = 'copied'; }, fallback);
    } else fallback();
  });
  $('write-btn').addEventListener('click', function () {
    post('api/write/' + state.current).then(function (r) {
      $('code-msg').textContent = 'written: ' + r.path;
      refreshRuns();
    }).catch(function (e) { $('code-msg').textContent = e.message; });
  });
  $('save-btn').addEventListener('click', function () {
    post('api/save/' + state.current).then(function (r) {
      $('save-msg').textContent = 'saved: ' + r.path;
    }).catch(function (e) { $('save-msg').textContent = e.message; });
  });

  // ---- the session -----------------------------------------------------
  $('end-btn').addEventListener('click', function () {
    post('api/end').then(ended, function (e) { $('session-state').textContent = e.message; });
  });
  function ended() {
    state.ended = true;
    $('ended').hidden = false;
    $('session-state').textContent = 'session ended';
    [].forEach.call(doc.querySelectorAll('button'), function (b) { b.disabled = true; });
    $('ended').scrollIntoView();
  }

  get('api/points').then(function (ps) {
    state.points = ps;
    renderPoints();
    var failure = ps.filter(function (p) { return p.failure; })[0];
    $('session-state').textContent = ps.length + ' fork point(s)' + (failure ? ', the failure at step ' + failure.step : '');
    doc.documentElement.classList.add('sf-ready');
  }).catch(function (e) { $('session-state').textContent = e.message; });
  refreshRuns();
  window.stepforkExplore = state; // for tests and the console
})();
