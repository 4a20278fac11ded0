/* SPDX-License-Identifier: Apache-2.0 */
/*
 * explain_html.c -- `ulysses explain --html`: one self-contained page.  The
 * page is the template explain_page.html (inline CSS and script, no network)
 * with the JSON document of --json (explain_json.c) embedded where its data
 * marker stands; the script renders everything from that document, so every
 * number the page shows is a number of `ulysses explain --json`.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "explain.h"

/* the template's lines (generated from explain_page.html at build time) */
static const char *const page_lines[] = {
#include "src/cli/explain_page.h"
    NULL,
};

static const char marker[] = "@EXPLAIN_DATA@";

/* The document inside <script type="application/json">: "</" would end the
 * element, so it is written "<\/" (the same JSON string). */
static int put_json(FILE *fp, const char *s)
{
    for (; *s; s++) {
        if (s[0] == '<' && s[1] == '/') {
            if (fputs("<\\", fp) < 0)
                return -1;
        } else if (fputc(*s, fp) == EOF) {
            return -1;
        }
    }
    return 0;
}

int xp_html(FILE *fp, const json_t *doc)
{
    char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    if (!text)
        return -1;
    int rc = 0, seen = 0;
    for (int i = 0; page_lines[i] && !rc; i++) {
        const char *line = page_lines[i], *m = strstr(line, marker);
        if (!m) {
            rc = fputs(line, fp) < 0;
            continue;
        }
        seen++;
        rc = fwrite(line, 1, (size_t)(m - line), fp) != (size_t)(m - line) || put_json(fp, text) ||
             fputs(m + strlen(marker), fp) < 0;
    }
    json_free_t release = NULL;
    json_get_alloc_funcs(NULL, &release);
    (release ? release : free)(text);
    return rc || seen != 1 ? -1 : 0;
}
