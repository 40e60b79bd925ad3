/*
** progress.c -- the progress bar of progress.h.
*/
#include "progress.h"
#include "sq_clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BAR_WIDTH 24
#define FIRST_DRAW_S 0.5 /* quiet before this: short work shows no bar */
#define REDRAW_S 0.1

struct sq_progress {
    char label[24];
    size_t total, done;
    double t0, last;
    int width; /* characters of the line on screen, 0 when none */
};

sq_progress *sq_progress_start(const char *label, size_t total)
{
    const char *env = getenv("SHARDQ_PROGRESS");
    if (env && strcmp(env, "0") == 0) return NULL;
    if (!isatty(STDERR_FILENO)) return NULL;
    sq_progress *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    p->total = total;
    p->t0 = sq_clock_s();
    return p;
}

/* 1234567 -> "1.23M" */
static void si(double v, char *buf, size_t len)
{
    static const char units[] = " kMGTPE";
    int u = 0;
    while (v >= 999.5 && u < 6) {
        v /= 1000.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%.0f", v);
    else
        snprintf(buf, len, "%.*f%c", v < 9.995 ? 2 : v < 99.95 ? 1 : 0, v, units[u]);
}

static void hms(double s, char *buf, size_t len)
{
    if (!(s >= 0.0) || s > 359999.0) {
        snprintf(buf, len, "--:--");
        return;
    }
    unsigned t = (unsigned)(s + 0.5); /* < 100 hours */
    if (t >= 3600)
        snprintf(buf, len, "%u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, len, "%u:%02u", t / 60, t % 60);
}

static void erase(sq_progress *p)
{
    if (!p->width) return;
    fprintf(stderr, "\r%*s\r", p->width, "");
    fflush(stderr);
    p->width = 0;
}

static void draw(sq_progress *p, double now)
{
    double el = now - p->t0;
    double rate = el > 0 ? (double)p->done / el : 0.0;
    char line[160], done[16], total[16], r[16], eta[32];
    si((double)p->done, done, sizeof done);
    si(rate, r, sizeof r);
    int k;
    if (p->total) {
        double f = p->done >= p->total ? 1.0 : (double)p->done / (double)p->total;
        char bar[BAR_WIDTH + 1];
        int fill = (int)(f * BAR_WIDTH);
        for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < fill ? '#' : '-';
        bar[BAR_WIDTH] = '\0';
        si((double)p->total, total, sizeof total);
        hms(rate > 0 ? (double)(p->total - (p->done < p->total ? p->done : p->total)) / rate
                     : -1.0,
            eta, sizeof eta);
        k = snprintf(line, sizeof line, "%s [%s] %5.1f%%  %s/%s  %s/s  ETA %s", p->label, bar,
                     100.0 * f, done, total, r, eta);
    } else {
        hms(el, eta, sizeof eta);
        k = snprintf(line, sizeof line, "%s  %s  %s/s  %s elapsed", p->label, done, r, eta);
    }
    if (k < 0) return;
    if (k >= (int)sizeof line) k = (int)sizeof line - 1;
    /* Pad over the previous line instead of relying on terminal escapes. */
    fprintf(stderr, "\r%s%*s", line, p->width > k ? p->width - k : 0, "");
    fflush(stderr);
    if (k > p->width) p->width = k;
    p->last = now;
}

void sq_progress_update(sq_progress *p, size_t done)
{
    if (!p) return;
    p->done = done;
    double now = sq_clock_s();
    if (now - p->t0 < FIRST_DRAW_S) return;
    if (p->width && now - p->last < REDRAW_S) return;
    draw(p, now);
}

void sq_progress_pause(sq_progress *p)
{
    if (p) erase(p);
}

void sq_progress_finish(sq_progress *p)
{
    if (!p) return;
    erase(p);
    free(p);
}
