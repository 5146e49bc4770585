/* --flame OUT.html: one self-contained page (no network: its script, style and data are inline)
 * holding the flame graph of every stage with sites of every process: a stage picker, click to
 * zoom into a frame, a search that marks the frames matching and sums their bytes, and a tooltip
 * with a frame's bytes and its share of the stage's need (what --sites's shares are of). The data is one JSON document:
 * {"stages": [{"name", "about", "base": bytes the shares are of, "of": "of the stage's need (42.0 MB)",
 * "tree": {"n": frame, "v": bytes, "c": [callees]}}], "pick": i}. */
#include "modes/modes.h"
#include "base/base.h"
#include "model/document.h"
#include "model/opts.h"
#include "model/select.h"
#include "model/sites.h"
#include "plot/plot.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

int mf_html_name(const char *path)
{
	size_t n = strlen(path);
	return n > 5 && !strcasecmp(path + n - 5, ".html");
}

static json_t *mf_html_node(const struct mf_fnode *nd)
{
	char *label = mf_frame_display(nd->label ? nd->label : "all");
	json_t *kids = json_array(), *o;
	for (size_t i = 0; i < nd->nkids; i++)
		json_array_append_new(kids, mf_html_node(&nd->kid[i]));
	o = json_pack("{s:s, s:f, s:o}", "n", label, "v", nd->bytes, "c", kids);
	free(label);
	return o;
}

/* How the sites were taken, then what the graph holds as --sites says it (its sum is the bottom
 * bar) and how much of it is exact: three lines. */
static char *mf_html_about(const struct mf_file *f, json_t *stage, int gpu, const struct mf_sites *s)
{
	char *about = mf_sites_about(f, stage, gpu, s), *list, *exact;
	mf_flame_list_lines(stage, gpu, s, &list, &exact);
	char *text = mf_xasprintf("%s\n%s\n%s", about, list, exact);
	free(about), free(list), free(exact);
	return text;
}

/* Every (file, stage) with sites as one entry; *PICK the one --flame's picture would draw. */
static json_t *mf_html_stages(const struct mf_set *set, const struct mf_opts *o, size_t *pick)
{
	json_t *stages = json_array();
	double best = -1;
	for (size_t i = 0; i < set->n; i++) {
		size_t k;
		json_t *st;
		json_array_foreach(set->f[i].stages, k, st) {
			const char *name = json_string_value(json_object_get(st, "name"));
			struct mf_sites s;
			if (!name || (o->stage && strcmp(name, o->stage)))
				continue;
			mf_sites_get(st, o->flame_gpu, &s);
			if (s.n) {
				struct mf_fnode root;
				double peak = mf_stage_peak(st, o->flame_gpu);
				char *proc = mf_proc_label(&set->f[i]),
				     *about = mf_html_about(&set->f[i], st, o->flame_gpu, &s);
				char *title = mf_xasprintf("%s · %s · %s", proc, name, o->flame_gpu ? "GPU" : "CPU");
				double base;
				char *of = mf_flame_share_of(st, o->flame_gpu, &s, &base);
				mf_flame_tree(&s, &root);
				if ((peak >= 0 ? peak : s.total) > best)
					best = peak >= 0 ? peak : s.total, *pick = json_array_size(stages);
				json_array_append_new(stages, json_pack("{s:s, s:s, s:f, s:s, s:o}", "name", title,
									"about", about, "base", base, "of", of, "tree",
									mf_html_node(&root)));
				mf_flame_free(&root);
				free(proc), free(about), free(title), free(of);
			}
			mf_sites_free(&s);
		}
	}
	return stages;
}

static const char mf_html_head[] =
	"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	"<title>memshim · call sites at the stages' peaks</title>\n<style>\n"
	"body{font:13px 'DejaVu Sans',sans-serif;margin:10px;color:#1a1a1a}\n"
	"#bar{display:flex;gap:10px;align-items:center;margin-bottom:6px}\n"
	"#about{color:#555;margin:4px 0 8px;white-space:pre-line}\n"
	"#graph{position:relative;width:100%;overflow:hidden;border-top:1px solid #ddd}\n"
	".f{position:absolute;height:16px;box-sizing:border-box;border:1px solid #fff;overflow:hidden;"
	"white-space:nowrap;font-size:11px;line-height:14px;padding-left:3px;cursor:pointer}\n"
	".f.hit{background:#d946ef!important;color:#fff}\n"
	"#tip{position:fixed;display:none;background:#fffbe6;border:1px solid #999;padding:4px 6px;"
	"pointer-events:none;max-width:640px;font-size:12px}\n"
	"</style></head><body>\n"
	"<div id=\"bar\"><b>memshim</b><label>stage <select id=\"stage\"></select></label>"
	"<input id=\"search\" placeholder=\"search frames\" size=\"30\">"
	"<button id=\"reset\">reset zoom</button><span id=\"found\"></span></div>\n"
	"<div id=\"about\"></div><div id=\"graph\"></div><div id=\"tip\"></div>\n"
	"<p style=\"color:#555\">width: bytes live at the peak · callers below, the allocating frame on "
	"top · click a frame to zoom, the bottom bar to zoom out · Python frames green, native warm</p>\n"
	"<script type=\"application/json\" id=\"data\">";

/* Draws with absolutely placed boxes: rows from the bottom, widths in percent of the zoomed frame.
 * Bytes read as the picture and the title print them (mf_fmt_bytes_cut: digits cut, not rounded). */
static const char mf_html_tail[] =
	"</script>\n<script>\n"
	"'use strict';\n"
	"const D=JSON.parse(document.getElementById('data').textContent);\n"
	"const $=id=>document.getElementById(id),ROW=17;\n"
	"let cur=null,zoom=null,query='';\n"
	"function mb(v){let u=0;while(u<5&&Math.abs(v)>=1000)v/=1024,u++;const a=Math.abs(v),"
	"d=u===0||a>=100?0:a>=10?1:2,t=v.toFixed(d+6);return t.slice(0,t.length-6-!d)+' '+"
	"['B','KB','MB','GB','TB','PB'][u]}\n"
	"function hue(n){let h=2166136261;for(const ch of n.split(/\\+0x| \\(/)[0])h=Math.imul(h^ch.charCodeAt(0),"
	"16777619);const v=((h>>>0)%1000)/1000;return n==='all'?'#d1d1d1':/\\.py:/.test(n)?"
	"`rgb(${140+89*v|0},${204+38*v|0},${76+51*v|0})`:/^0x/.test(n)?'#b8bcc8':"
	"`rgb(${230+25*v|0},${89+115*v|0},${38+38*v|0})`}\n"
	"function depth(n){let d=0;for(const c of n.c)d=Math.max(d,depth(c));return d+1}\n"
	"function path(n,t,p){if(n===t)return p.concat(n);for(const c of n.c){const r=path(c,t,p.concat(n));"
	"if(r)return r}return null}\n"
	"function matches(n,q){let s=0;if(n.n.toLowerCase().includes(q))return n.v;for(const c of n.c)"
	"s+=matches(c,q);return s}\n"
	"function box(g,n,x,w,row,H,alone){if(w<0.05)return;const e=document.createElement('div');"
	"e.className='f'+(query&&n.n.toLowerCase().includes(query)?' hit':'');e.style.left=x+'%';"
	"e.style.width=w+'%';e.style.top=(H-(row+1)*ROW)+'px';e.style.background=hue(n.n);"
	"e.textContent=n.n+' · '+mb(n.v);e.title=n.n+'\\n'+share(n.v);"
	"e.onclick=()=>{zoom=n===cur.tree?null:n;draw()};"
	"e.onmousemove=ev=>tip(ev,n);e.onmouseleave=()=>{$('tip').style.display='none'};"
	"g.appendChild(e);if(alone)return;let cx=x;for(const c of n.c){const cw=w*c.v/(n.v||1);"
	"box(g,c,cx,cw,row+1,H);cx+=cw}}\n"
	"function share(v){return mb(v)+', '+(cur.base>0?100*v/cur.base:0).toFixed(1)+'% '+cur.of}\n"
	"function tip(ev,n){const t=$('tip');t.textContent=n.n+' — '+share(n.v);t.style.display='block';"
	"t.style.left=Math.min(ev.clientX+12,innerWidth-300)+'px';t.style.top=(ev.clientY+14)+'px'}\n"
	"function draw(){const g=$('graph'),root=cur.tree,top=zoom||root,chain=zoom?path(root,zoom,[]):[root];"
	"const H=(depth(top)+chain.length-1)*ROW+2;g.textContent='';g.style.height=H+'px';"
	"chain.slice(0,-1).forEach((n,i)=>box(g,n,0,100,i,H,true));"
	"box(g,top,0,100,chain.length-1,H);$('about').textContent=cur.about;"
	"$('found').textContent=query?'matched: '+share(matches(top,query)):''}\n"
	"D.stages.forEach((s,i)=>{const o=document.createElement('option');o.value=i;o.textContent=s.name;"
	"$('stage').appendChild(o)});\n"
	"$('stage').onchange=()=>{cur=D.stages[$('stage').value];zoom=null;draw()};\n"
	"$('search').oninput=()=>{query=$('search').value.toLowerCase();draw()};\n"
	"$('reset').onclick=()=>{zoom=null;draw()};\n"
	"$('stage').value=D.pick;cur=D.stages[D.pick];draw();\n"
	"</script></body></html>\n";

/* JSON text safe inside <script>: "</" written as "<\/" (the same string to JSON). */
static void mf_html_json(FILE *fp, const char *text)
{
	for (const char *p = text; *p; p++) {
		if (p[0] == '<' && p[1] == '/')
			fputs("<\\", fp);
		else
			fputc(*p, fp);
	}
}

int mf_flame_html(FILE *err, const struct mf_set *s, const struct mf_opts *o)
{
	size_t pick = 0, n;
	json_t *stages = mf_html_stages(s, o, &pick);
	if (!json_array_size(stages)) {
		json_decref(stages);
		fprintf(err, "memshim-format: no %s call sites%s%s%s to draw in %s%s\n", o->flame_gpu ? "GPU" : "CPU",
			o->stage ? " for stage \"" : "", o->stage ? o->stage : "", o->stage ? "\"" : "", s->f[0].path,
			s->n > 1 ? " or the other files" : "");
		return MF_BAD;
	}
	json_t *doc = json_pack("{s:o, s:I}", "stages", stages, "pick", (json_int_t)pick);
	char *text = json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(17)), *page;
	FILE *fp = open_memstream(&page, &n);
	if (!text || !fp)
		mf_oom();
	fputs(mf_html_head, fp);
	mf_html_json(fp, text);
	fputs(mf_html_tail, fp);
	fclose(fp);
	int rc = mf_write_whole(err, o->mode_arg, page, n);
	free(page), free(text);
	json_decref(doc);
	return rc;
}
