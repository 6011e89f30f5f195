// The gates that need a real browser: Debian's Chromium driven by playwright-core, over a
// built site served from a local HTTP server.
//
//   node .ci/browser.mjs axe SITE                  axe-core on one page of each kind, light and dark
//   node .ci/browser.mjs search SITE PASTED.json   the home page's search box, each paste's page first
//   node .ci/browser.mjs reports SITE REPORTS.json [MIN]
//                                                  the share of real reports whose page comes first
//   node .ci/browser.mjs redirect SITE OLD NEW     /errors/OLD/ lands on /errors/NEW/
//
// Each prints one line per problem naming the page (and the rule, paste or element), then a
// closing "N passed, N failed" line, and exits 1 when anything failed.
import { readFileSync, existsSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(import.meta.url);
const { chromium } = require("playwright-core");
const AXE = require.resolve("axe-core/axe.min.js");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const TYPES = { ".html": "text/html; charset=utf-8", ".json": "application/json", ".js": "text/javascript", ".css": "text/css", ".xml": "application/xml", ".txt": "text/plain" };

function serve(root) {
  // Static hosting as the site expects it: a folder means its index.html, a miss is 404.html.
  const server = createServer((request, response) => {
    let file = path.join(root, decodeURIComponent(new URL(request.url, "http://x").pathname));
    if (!file.startsWith(root)) file = root;
    if (existsSync(file) && statSync(file).isDirectory()) file = path.join(file, "index.html");
    const found = existsSync(file);
    if (!found) file = path.join(root, "404.html");
    response.writeHead(found ? 200 : 404, { "content-type": TYPES[path.extname(file)] || "application/octet-stream" });
    response.end(existsSync(file) ? readFileSync(file) : "");
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

async function withBrowser(root, work) {
  const server = await serve(path.resolve(root));
  const base = `http://127.0.0.1:${server.address().port}/`;
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    return await work(browser, base);
  } finally {
    await browser.close();
    server.close();
  }
}

function finish(passed, failures) {
  for (const line of failures) console.log(line);
  console.log(`${passed} passed, ${failures.length} failed`);
  process.exit(failures.length ? 1 : 0);
}

// One page of each kind, chosen from the site's own index so the choice follows the content.
function pagesOfEachKind(root) {
  const index = JSON.parse(readFileSync(path.join(root, "api/errors/index.json"), "utf8")).errors;
  const pick = (test) => index.find(test);
  const pages = { home: "", modules: "modules/", exceptions: "exceptions/", changes: "changes/", "not found": "no-such-page/" };
  const kinds = {
    "curated error": (e) => e.curated && e.status === "active",
    "uncurated error": (e) => !e.curated && e.message && e.status === "active",
    "message-less assert": (e) => e.kind === "assert" && !e.message && e.status === "active",
    warning: (e) => e.kind === "warning" && e.status === "active",
    "retired error": (e) => e.status === "retired",
    "moved error (redirect)": (e) => e.status === "moved",
  };
  for (const [kind, test] of Object.entries(kinds)) {
    const entry = pick(test);
    if (entry) pages[kind] = `errors/${entry.id}/`;
  }
  const first = pick((e) => e.status === "active");
  if (first) {
    const folder = path.posix.dirname(first.path);
    pages["module folder"] = `modules/${folder}/`;
    pages["exception type"] = `exceptions/${encodeURIComponent(first.exception)}/`;
  }
  return pages;
}

async function axe(root) {
  const pages = pagesOfEachKind(root);
  await withBrowser(root, async (browser, base) => {
    let passed = 0;
    const failures = [];
    for (const scheme of ["light", "dark"]) {
      const context = await browser.newContext({ colorScheme: scheme });
      const page = await context.newPage();
      for (const [kind, url] of Object.entries(pages)) {
        // A redirect page would leave before axe runs: it is checked without its refresh
        // (the redirect gate follows it), and its delay must be 0, as axe's meta-refresh rule asks.
        if (kind.startsWith("moved")) {
          const html = readFileSync(path.join(root, url, "index.html"), "utf8");
          if (!/<meta http-equiv="refresh" content="0;/.test(html)) failures.push(`axe: /${url} (${kind}): no immediate meta refresh`);
          await page.route(base + url, (route) => route.fulfill({ contentType: "text/html", body: html.replace(/<meta http-equiv="refresh"[^>]*>/, "") }));
        }
        await page.goto(base + url, { waitUntil: "load" });
        await page.addScriptTag({ path: AXE });
        const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
        const bad = result.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
        for (const violation of bad) {
          const where = violation.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ");
          failures.push(`axe: /${url} (${kind}, ${scheme}): ${violation.impact} ${violation.id}: ${violation.help} at ${where}`);
        }
        if (!bad.length) passed += 1;
      }
      await context.close();
    }
    console.log(`axe: ${Object.keys(pages).length} kinds of page x light/dark: ${Object.entries(pages).map(([k, u]) => `${k} /${u}`).join("; ")}`);
    finish(passed, failures);
  });
}

// The first result's page for a paste typed into the home page's search box.
async function firstResult(page, base, paste) {
  await page.goto(base, { waitUntil: "load" });
  await page.fill("#search-input", paste);
  await page.click('#search-form [type="submit"]');
  // Done when the results region holds a final list or a final sentence.
  await page.waitForFunction(() => {
    const out = document.getElementById("search-results");
    const text = out.textContent;
    return text && !text.includes("Searching") && !text.includes("still searching");
  }, null, { timeout: 15000 });
  return page.evaluate(() => {
    const link = document.querySelector("#search-results a");
    return link ? new URL(link.href).pathname : null;
  });
}

async function search(root, pastedFile) {
  const cases = JSON.parse(readFileSync(pastedFile, "utf8"));
  await withBrowser(root, async (browser, base) => {
    const page = await browser.newPage();
    let passed = 0;
    const failures = [];
    for (const [number, item] of cases.entries()) {
      const first = await firstResult(page, base, item.paste);
      const want = item.expect ? `/errors/${item.expect}/` : null;
      const label = `pasted.json[${number}] (${item.kind}) ${JSON.stringify(item.paste.slice(0, 70))}`;
      if (first === want) passed += 1;
      else failures.push(`search: ${label}: first result ${first ?? "none"}, expected ${want ?? "none"}`);
    }
    finish(passed, failures);
  });
}

// A set of pastes with the page each should find (tests/data/real_reports.json, the real
// reports; tests/data/old_pastes.json, messages as older releases worded them): each labelled
// paste's page first, as a share; pastes without `expect` (reports SGLang no longer raises) are
// left out. Every miss is listed; fails when the share is below MIN (default 0).
async function reports(root, reportsFile, min = "0") {
  const cases = JSON.parse(readFileSync(reportsFile, "utf8"));
  await withBrowser(root, async (browser, base) => {
    const page = await browser.newPage();
    let passed = 0, labelled = 0;
    const misses = [];
    for (const [number, item] of cases.entries()) {
      if (!item.expect) continue;
      labelled += 1;
      const first = await firstResult(page, base, item.paste);
      if (first === `/errors/${item.expect}/`) passed += 1;
      else misses.push(`reports: ${path.basename(reportsFile)}[${number}] ${item.url ?? "release " + item.release} ${JSON.stringify(item.paste.slice(0, 70))}: first result ${first ?? "none"}, expected /errors/${item.expect}/`);
    }
    for (const line of misses) console.log(line);
    const share = labelled ? passed / labelled : 1;
    console.log(`reports: ${passed} of ${labelled} labelled reports first (${(100 * share).toFixed(1)}%), ${misses.length} missed`);
    process.exit(share >= Number(min) ? 0 : 1);
  });
}

async function redirect(root, oldId, newId) {
  await withBrowser(root, async (browser, base) => {
    const page = await browser.newPage();
    await page.goto(`${base}errors/${oldId}/`);
    const want = `/errors/${newId}/`;
    try {
      await page.waitForURL((url) => url.pathname === want, { timeout: 10000 });
    } catch {
      finish(0, [`redirect: /errors/${oldId}/ stayed at ${new URL(page.url()).pathname}, expected ${want}`]);
    }
    const heading = await page.textContent("h1");
    console.log(`redirect: /errors/${oldId}/ -> ${want} (${heading.trim().slice(0, 80)})`);
    finish(1, []);
  });
}

const [mode, ...rest] = process.argv.slice(2);
const modes = { axe, search, reports, redirect };
if (!modes[mode]) {
  console.error("usage: node .ci/browser.mjs axe SITE | search SITE PASTED.json | reports SITE REPORTS.json [MIN] | redirect SITE OLD NEW");
  process.exit(2);
}
await modes[mode](...rest);
