// A one-page dashboard: it reads the same JSON API a user would.
export function dashboardPage(): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>Skipjack</title>
<style>body{font:14px system-ui;margin:2em}table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left}
.succeeded{color:#080}.failed{color:#b00}.running{color:#06c}.cancelled{color:#888}</style></head><body>
<h1>Skipjack</h1><p id="err" style="color:#b00"></p><h2>Workers</h2><table id="w"></table><h2>Recent jobs</h2><table id="j"></table>
<script>
const esc = (s) => String(s ?? '').replace(/[&<>"]/g, (c) => '&#' + c.charCodeAt(0) + ';');
// With SKIPJACK_TOKENS set, open the page as /#token=TOKEN; the fragment never leaves the browser.
const token = new URLSearchParams(location.hash.slice(1)).get('token');
const get = (path) => fetch(path, { headers: token ? { authorization: 'Bearer ' + token } : {} }).then((r) => {
  if (!r.ok) throw new Error(path + ': HTTP ' + r.status + (r.status === 401 ? ' (open this page as /#token=TOKEN)' : ''));
  return r.json();
});
async function refresh() {
  let w, j;
  try {
    [w, j] = await Promise.all([get('/workers'), get('/jobs?limit=50')]);
    document.getElementById('err').textContent = '';
  } catch (e) {
    document.getElementById('err').textContent = e.message;
    return;
  }
  document.getElementById('w').innerHTML = '<tr><th>name</th><th>region</th><th>state</th><th>slots used</th><th>last seen</th></tr>' +
    w.workers.map(x => '<tr><td>' + esc(x.name) + '</td><td>' + esc(x.region) + '</td><td>' + esc(x.state) + '</td><td>' + x.allocated.slots + '/' + x.capacity.slots + '</td><td>' + esc(x.lastSeenAt) + '</td></tr>').join('');
  document.getElementById('j').innerHTML = '<tr><th>id</th><th>queue</th><th>state</th><th>attempts</th><th>exit</th><th>command</th></tr>' +
    j.jobs.map(x => '<tr><td><a href="/jobs/' + x.id + '/logs">' + x.id + '</a></td><td>' + esc(x.queue) + '</td><td class="' + esc(x.state) + '">' + esc(x.state) + '</td><td>' + x.attempts + '/' + x.maxAttempts + '</td><td>' + esc(x.exitCode ?? x.signal) + '</td><td><code>' + esc(x.command.join(' ')) + '</code></td></tr>').join('');
}
refresh(); setInterval(refresh, 2000);
</script></body></html>`;
}
