/*
** document.c -- the document of `shardq report` (report.h): Markdown and HTML
** written side by side from the same calls, tables from SQL, and the checks
** and helpers the command shares with the gnuplot scripts.
*/
#include "report/report.h"
#include "report/embedded.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *report_script(const char *name)
{
    static const char dir[] = "analysis/";
    size_t n = strlen(name);
    for (const report_embedded *f = report_scripts; f->name; f++)
        if (!strncmp(f->name, dir, sizeof dir - 1) && !strncmp(f->name + sizeof dir - 1, name, n) &&
            !strcmp(f->name + sizeof dir - 1 + n, ".gp"))
            return f->text;
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Strings                                                                  */
/* ------------------------------------------------------------------------ */

static void reserve(report_buf *b, size_t more)
{
    if (b->oom || b->n + more + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + more + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

void report_printf(report_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    reserve(b, (size_t)n);
    if (b->oom) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

void report_buf_free(report_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* HTML text: the five characters that would be markup, escaped. */
static void html_text(report_buf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': report_printf(b, "&amp;"); break;
        case '<': report_printf(b, "&lt;"); break;
        case '>': report_printf(b, "&gt;"); break;
        case '"': report_printf(b, "&quot;"); break;
        case '\'': report_printf(b, "&#39;"); break;
        default: report_printf(b, "%c", *s); break;
        }
    }
}

/* Markdown text inside a table cell or a paragraph: the characters that
** would start markup are escaped (a run label may hold '*', '_' or '|'). */
static void md_text(report_buf *b, const char *s)
{
    for (; *s; s++) {
        if (strchr("\\`*_[]|<>#", *s))
            report_printf(b, "\\%c", *s);
        else if (*s == '\n')
            report_printf(b, " ");
        else
            report_printf(b, "%c", *s);
    }
}

/* ------------------------------------------------------------------------ */
/* Run ids                                                                  */
/* ------------------------------------------------------------------------ */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

void report_ranges(report_buf *out, const char *ids)
{
    size_t n = 0, cap = 1;
    for (const char *p = ids; *p; p++) cap += *p == ',';
    int64_t *v = malloc(cap * sizeof *v);
    if (!v) {
        out->oom = 1;
        return;
    }
    for (const char *p = ids; *p && n < cap;) {
        char *end;
        long long x = strtoll(p, &end, 10);
        if (end == p) break;
        v[n++] = x;
        p = *end == ',' ? end + 1 : end;
    }
    qsort(v, n, sizeof *v, cmp_i64);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && v[j + 1] <= v[j] + 1) j++;
        report_printf(out, "%s%lld", i ? ", " : "", (long long)v[i]);
        if (v[j] != v[i]) report_printf(out, "-%lld", (long long)v[j]);
        i = j + 1;
    }
    free(v);
}

/* ------------------------------------------------------------------------ */
/* The document                                                             */
/* ------------------------------------------------------------------------ */

/* Everything the page needs is in it: no script, no font, no stylesheet
** from elsewhere, so the directory can be copied or mailed as it is. */
static const char html_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>%s</title>\n<style>\n"
    "body { font-family: sans-serif; max-width: 960px; margin: 2em auto; padding: 0 1em;"
    " color: #222; line-height: 1.45; }\n"
    "h1 { font-size: 1.6em; } h2 { font-size: 1.3em; margin-top: 2em;"
    " border-bottom: 1px solid #ddd; } h3 { font-size: 1.05em; }\n"
    "figure { margin: 1.5em 0; } figure img { max-width: 100%%; height: auto;"
    " border: 1px solid #eee; }\n"
    "figcaption { font-size: 0.92em; color: #444; }\n"
    "table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }\n"
    "th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; }\n"
    "th { background: #f4f4f4; } td.n { text-align: right;"
    " font-variant-numeric: tabular-nums; }\n"
    "caption { text-align: left; font-size: 0.92em; color: #444; padding-bottom: 0.3em; }\n"
    "p.skipped { color: #8a5a00; }\n"
    "</style>\n</head>\n<body>\n";

void report_begin(report_doc *d, const char *title)
{
    memset(d, 0, sizeof *d);
    report_printf(&d->md, "# ");
    md_text(&d->md, title);
    report_printf(&d->md, "\n\n");
    report_buf t = {0};
    html_text(&t, title);
    report_printf(&d->html, html_head, t.p ? t.p : "");
    if (t.oom) d->html.oom = 1;
    report_buf_free(&t);
    report_printf(&d->html, "<h1>");
    html_text(&d->html, title);
    report_printf(&d->html, "</h1>\n");
}

void report_heading(report_doc *d, const char *text)
{
    report_printf(&d->md, "## ");
    md_text(&d->md, text);
    report_printf(&d->md, "\n\n");
    report_printf(&d->html, "<h2>");
    html_text(&d->html, text);
    report_printf(&d->html, "</h2>\n");
}

void report_para(report_doc *d, const char *text)
{
    md_text(&d->md, text);
    report_printf(&d->md, "\n\n");
    report_printf(&d->html, "<p>");
    html_text(&d->html, text);
    report_printf(&d->html, "</p>\n");
}

void report_list(report_doc *d, const char *const *items, int n)
{
    report_printf(&d->html, "<ul>\n");
    for (int i = 0; i < n; i++) {
        report_printf(&d->md, "- ");
        md_text(&d->md, items[i]);
        report_printf(&d->md, "\n");
        report_printf(&d->html, "<li>");
        html_text(&d->html, items[i]);
        report_printf(&d->html, "</li>\n");
    }
    report_printf(&d->md, "\n");
    report_printf(&d->html, "</ul>\n");
}

void report_figure(report_doc *d, const char *name, const char *title, const char *caption)
{
    report_printf(&d->md, "### ");
    md_text(&d->md, title);
    unsigned f = d->formats ? d->formats : 3;
    /* shown: the PNG, else the SVG; a PDF alone is only linked */
    const char *shown = f & 1 ? "png" : f & 2 ? "svg" : NULL;
    static const char *const ext[3] = {"png", "svg", "pdf"}, *const big[3] = {"PNG", "SVG", "PDF"};
    if (shown) {
        report_printf(&d->md, "\n\n![");
        md_text(&d->md, title);
        report_printf(&d->md, "](%s.%s)", name, shown);
    }
    report_printf(&d->md, "\n\n");
    md_text(&d->md, caption);
    report_printf(&d->md, " (");
    for (int k = 0; k < 3; k++)
        if (f & (1u << k)) report_printf(&d->md, "[%s](%s.%s), ", big[k], name, ext[k]);
    report_printf(&d->md, "[script](scripts/%s.gp))\n\n", name);

    report_printf(&d->html, "<h3>");
    html_text(&d->html, title);
    report_printf(&d->html, "</h3>\n<figure id=\"%s\">\n", name);
    if (shown) {
        report_printf(&d->html, "<a href=\"%s.%s\"><img src=\"%s.%s\" style=\"max-width:100%%;"
                                "height:auto\" width=\"900\" height=\"560\" alt=\"",
                      name, f & 2 ? "svg" : shown, name, shown);
        html_text(&d->html, title);
        report_printf(&d->html, "\"></a>\n");
    }
    report_printf(&d->html, "<figcaption>");
    html_text(&d->html, caption);
    report_printf(&d->html, " (");
    for (int k = 0; k < 3; k++)
        if (f & (1u << k))
            report_printf(&d->html, "<a href=\"%s.%s\">%s</a>, ", name, ext[k], big[k]);
    report_printf(&d->html, "<a href=\"scripts/%s.gp\">script</a>)</figcaption>\n</figure>\n",
                  name);
}

void report_skipped(report_doc *d, const char *title, const char *why)
{
    report_printf(&d->md, "### ");
    md_text(&d->md, title);
    report_printf(&d->md, "\n\nNot drawn: ");
    md_text(&d->md, why);
    report_printf(&d->md, ".\n\n");
    report_printf(&d->html, "<h3>");
    html_text(&d->html, title);
    report_printf(&d->html, "</h3>\n<p class=\"skipped\">Not drawn: ");
    html_text(&d->html, why);
    report_printf(&d->html, ".</p>\n");
}

/* A cell as text: NULL is '-', reals have four significant digits, a
** "runs" column its ids as ranges. */
static void cell_text(const sq_store_cursor *c, int i, report_buf *out, int *numeric)
{
    int type = sq_store_cursor_type(c, i);
    *numeric = type == SQ_STORE_INTEGER || type == SQ_STORE_REAL;
    if (type == SQ_STORE_NULL)
        report_printf(out, "-");
    else if (type == SQ_STORE_INTEGER)
        report_printf(out, "%lld", (long long)sq_store_cursor_int(c, i));
    else if (type == SQ_STORE_REAL)
        report_printf(out, "%.4g", sq_store_cursor_double(c, i));
    else if (strcmp(sq_store_cursor_name(c, i), "runs") == 0)
        report_ranges(out, sq_store_cursor_text(c, i, NULL));
    else
        report_printf(out, "%s", sq_store_cursor_text(c, i, NULL));
}

int report_table(report_doc *d, sq_store_cursor *c, const char *caption, const char *none,
                 sq_error *err)
{
    int ncols = sq_store_cursor_columns(c), rows = 0, rc;
    report_buf md = {0}, html = {0}, cell = {0};
    while ((rc = sq_store_cursor_step(c, err)) == 1) {
        if (rows++ == 0) {
            report_printf(&md, "|");
            report_printf(&html, "<table>\n<caption>");
            html_text(&html, caption);
            report_printf(&html, "</caption>\n<tr>");
            for (int i = 0; i < ncols; i++) {
                report_printf(&md, " ");
                md_text(&md, sq_store_cursor_name(c, i));
                report_printf(&md, " |");
                report_printf(&html, "<th>");
                html_text(&html, sq_store_cursor_name(c, i));
                report_printf(&html, "</th>");
            }
            report_printf(&md, "\n|");
            for (int i = 0; i < ncols; i++) {
                int t = sq_store_cursor_type(c, i);
                report_printf(&md, "%s|", t == SQ_STORE_INTEGER || t == SQ_STORE_REAL ? "---:" : "---");
            }
            report_printf(&md, "\n");
            report_printf(&html, "</tr>\n");
        }
        report_printf(&md, "|");
        report_printf(&html, "<tr>");
        for (int i = 0; i < ncols; i++) {
            int numeric;
            cell.n = 0;
            cell_text(c, i, &cell, &numeric);
            report_printf(&md, " ");
            md_text(&md, cell.p ? cell.p : "");
            report_printf(&md, " |");
            report_printf(&html, numeric ? "<td class=\"n\">" : "<td>");
            html_text(&html, cell.p ? cell.p : "");
            report_printf(&html, "</td>");
        }
        report_printf(&md, "\n");
        report_printf(&html, "</tr>\n");
    }
    if (rc == 0 && rows) {
        md_text(&d->md, caption);
        report_printf(&d->md, "\n\n%s\n", md.p ? md.p : "");
        report_printf(&d->html, "%s</table>\n", html.p ? html.p : "");
    } else if (rc == 0 && none) {
        md_text(&d->md, caption);
        report_printf(&d->md, ": ");
        md_text(&d->md, none);
        report_printf(&d->md, ".\n\n");
        report_printf(&d->html, "<p class=\"skipped\">");
        html_text(&d->html, caption);
        report_printf(&d->html, ": ");
        html_text(&d->html, none);
        report_printf(&d->html, ".</p>\n");
    }
    if (md.oom || html.oom || cell.oom) d->md.oom = 1;
    report_buf_free(&md);
    report_buf_free(&html);
    report_buf_free(&cell);
    return rc == 0 ? rows : rc;
}

void report_end(report_doc *d)
{
    report_printf(&d->html, "</body>\n</html>\n");
}

void report_doc_free(report_doc *d)
{
    report_buf_free(&d->md);
    report_buf_free(&d->html);
}
