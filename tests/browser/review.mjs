// The review page in a real browser (Debian's Chromium driven by
// playwright-core): sign in with the token, correct one document, confirm
// another, correct one page of a multi-page document, and after each click
// read folio.corrections back with psql. Run by tests/e2e/test_review.sh:
//   node review.mjs CHROMIUM BASE_URL TOKEN CONNINFO SCREENSHOT DOC_CORRECT DOC_CONFIRM DOC_PAGES
import { execFileSync } from 'node:child_process';
import { chromium } from 'playwright-core';

const [chrome, base, token, conninfo, shot, docCorrect, docConfirm, docPages] = process.argv.slice(2);
const sql = (q) => execFileSync('psql', [conninfo, '-AtqX', '-c', q], { encoding: 'utf8' }).trim();
let failed = 0;
const expect = (what, got, want) => {
  if (got !== want) { console.log(`FAIL: ${what}: got '${got}', want '${want}'`); failed++; }
  else console.log(`ok: ${what}`);
};
// Submits a form by clicking its button and waits for the page the POST
// redirects to; returns that page's HTTP status.
const submit = async (button) => {
  const post = page.waitForResponse((r) => r.request().method() === 'POST');
  const next = page.waitForResponse((r) => r.request().redirectedFrom()?.method() === 'POST');
  next.catch(() => {});
  await button.click();
  const p = await post;
  if (p.status() !== 303) {
    console.log(`POST ${p.url()}: ${p.status()} ${await p.text().catch(() => '')}`);
    return p.status();
  }
  const r = await next;
  await page.waitForLoadState('load');
  return r.status();
};
const lastCorrection = (doc) =>
  sql(`SELECT label || '/' || coalesce(page::text, '-') FROM folio.corrections WHERE document_id = ${doc} ORDER BY id DESC LIMIT 1`);

// Headless Chromium on the CI machine: no sandbox (it runs as root), and
// none of Chromium's own network traffic (the machine has no network).
const browser = await chromium.launch({
  executablePath: chrome, headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'],
});
const page = await (await browser.newContext()).newPage();
// An escaped file name must never run as script: any dialog fails the test.
page.on('dialog', async (d) => { console.log(`FAIL: a dialog opened: ${d.message()}`); failed++; await d.dismiss(); });
page.on('pageerror', (e) => { console.log(`FAIL: page error: ${e}`); failed++; });

await page.goto(`${base}/login?token=${token}`);
expect('signed in, at the review page', new URL(page.url()).pathname, '/');
expect('title', await page.title(), 'folio review');
const docs = await page.locator('section.doc').evaluateAll((s) => s.map((e) => e.dataset.document));
expect('queue = SQL (needs review, lowest confidence first)', docs.join(','),
       sql(`SELECT string_agg(document_id::text, ',' ORDER BY confidence, id) FROM folio.results WHERE needs_review`));
// The thumbnails are <img loading=lazy>: they load after the page's load
// event, in the server's own time (each decodes its page from the blob), so
// the check waits until every one has finished loading or failed (bounded),
// then judges: a failed image is complete with no width and still fails.
const thumbSel = `section.doc[data-document="${docPages}"] figure img`;
await page.locator(thumbSel).first().scrollIntoViewIfNeeded();
await page.waitForFunction((sel) => {
  const imgs = [...document.querySelectorAll(sel)];
  return imgs.length > 0 && imgs.every((i) => i.complete);
}, thumbSel, { timeout: 120000 }).catch(() => {});
const thumbs = await page.locator(thumbSel).evaluateAll(
  (imgs) => imgs.map((i) => i.complete && i.naturalWidth > 0));
expect('multi-page document shows a loaded thumbnail per page', thumbs.join(','), 'true,true');
await page.screenshot({ path: shot, fullPage: true });

// Correct: pick another label for the whole document.
let card = page.locator(`section.doc[data-document="${docCorrect}"]`);
await card.locator('form.correct select').selectOption('letter');
expect('correct: back at the list', await submit(card.locator('form.correct button')), 200);
expect('correct wrote folio.corrections', lastCorrection(docCorrect), 'letter/-');
expect('corrected document left the open queue',
       await page.locator(`section.doc[data-document="${docCorrect}"]`).count(), 0);

// Confirm: the label the page showed.
card = page.locator(`section.doc[data-document="${docConfirm}"]`);
const shown = await card.getAttribute('data-label');
expect('confirm: back at the list', await submit(card.locator('form.confirm button')), 200);
expect('confirm wrote the shown label', lastCorrection(docConfirm), `${shown}/-`);

// One page of a multi-page document.
card = page.locator(`section.doc[data-document="${docPages}"]`);
const p2 = card.locator('figure[data-page="2"] form.page');
await p2.locator('select').selectOption('form');
expect('page correction: back at the list', await submit(p2.locator('button')), 200);
expect('page correction wrote page 2', lastCorrection(docPages), 'form/2');

// The "every result" filter shows the corrected documents with their correction.
await page.goto(`${base}/?review=all`);
expect('filter review=all shows the correction',
       await page.locator(`section.doc[data-document="${docCorrect}"]`).getAttribute('data-corrected'), 'letter');
await browser.close();
console.log(failed ? `${failed} browser checks failed` : 'browser checks passed');
process.exit(failed ? 1 : 0);
