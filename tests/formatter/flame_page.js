// Runs the script of a `memshim-format --flame OUT.html` page in node against a small stand-in for
// the DOM, and uses it as a reader would: the stage drawn, a search, a zoom, a tooltip, another
// stage. usage: node flame_page.js PAGE.html   exit 0 when every step shows what it should
'use strict';
const fs = require('fs');
const html = fs.readFileSync(process.argv[2], 'utf8');
const fail = why => { console.log('flame_page: ' + why); process.exit(1); };
if (/\b(src|href)\s*=|https?:|@import|url\(/.test(html.replace(/<script type="application\/json"[\s\S]*?<\/script>/, '')))
	fail('the page reaches out of itself');
const data = html.match(/<script type="application\/json" id="data">([\s\S]*?)<\/script>/);
const code = html.match(/<script>\n([\s\S]*?)<\/script>/);
if (!data || !code) fail('no data or no script');

class El {
	constructor(tag) { this.tag = tag; this.children = []; this.style = {}; this._t = ''; this.value = ''; this.className = ''; }
	set textContent(v) { this._t = v; this.children = []; }
	get textContent() { return this._t; }
	appendChild(c) { this.children.push(c); return c; }
}
const els = {};
for (const id of ['data', 'stage', 'search', 'reset', 'found', 'about', 'graph', 'tip']) els[id] = new El('div');
els.data._t = data[1];
global.document = { getElementById: id => els[id], createElement: t => new El(t) };
global.innerWidth = 1200;
(0, eval)(code[1].replace("'use strict';", ''));

const boxes = () => els.graph.children;
const named = prefix => boxes().find(b => b.textContent.startsWith(prefix));
const D = JSON.parse(data[1]);
const want = D.stages[D.pick];
if (els.about.textContent !== want.about) fail('the picked stage is not the one shown: ' + els.about.textContent);
if (els.stage.children.length !== D.stages.length) fail('the stage picker lacks stages');
const root = named('all · ');
if (!root || root.style.width !== '100%') fail('no root bar as wide as the graph');
// the title's second line names the bytes listed, the third how much is exact: the root bar is their sum
const about = els.about.textContent.split('\n'), listed = (about[1] || '').match(/: ([0-9.]+ [KMGTP]?B) in \d+ sites?/);
if (!listed || root.textContent !== 'all · ' + listed[1]) fail('the root bar (' + root.textContent + ') is not the bytes listed: ' + about[1]);
if (!/exact/.test(about[2] || '')) fail('the title does not say how much is exact: ' + about[2]);
const kidsWidth = boxes().filter(b => b.style.top === (parseFloat(root.style.top) - 17) + 'px')
	.reduce((s, b) => s + parseFloat(b.style.width), 0);
if (kidsWidth > 100.0001) fail('the row above the root is wider than it: ' + kidsWidth);
for (const [q, shown] of Object.entries(JSON.parse(process.argv[3] || '{}'))) {
	els.search.value = q; els.search.oninput();
	if (!boxes().some(b => b.className.includes('hit'))) fail('search ' + q + ' marks nothing');
	if (!els.found.textContent.startsWith('matched: ' + shown)) fail('search ' + q + ': ' + els.found.textContent);
}
els.search.value = ''; els.search.oninput();
const big = boxes().filter(b => parseFloat(b.style.width) < 99.9).sort((a, b) => parseFloat(b.style.width) - parseFloat(a.style.width))[0];
const label = big.textContent;
big.onclick();
if (named(label).style.width !== '100%') fail('a click does not zoom into ' + label);
named(label).onmousemove({ clientX: 5, clientY: 5 });
if (!/\d% of the stage's (need|peak) \(/.test(els.tip.textContent) || !els.tip.textContent.endsWith(want.of) ||
    els.tip.style.display !== 'block') fail('no tooltip with the share of the stage\'s need: ' + els.tip.textContent);
named('all · ').onclick();
if (named(label) && named(label).style.width === '100%') fail('the root bar does not zoom out');
if (D.stages.length > 1) {
	els.stage.value = String((D.pick + 1) % D.stages.length); els.stage.onchange();
	if (els.about.textContent !== D.stages[(D.pick + 1) % D.stages.length].about) fail('the picker does not switch');
}
console.log('flame_page: ' + D.stages.length + ' stages, ' + boxes().length + ' boxes, search, zoom, tooltip and picker work');
