/*
 * folio_test_text_pdf: writes a born-digital PDF with cairo (the library
 * poppler-glib renders with), for the PDF tests.
 *
 *   folio_test_text_pdf OUT.pdf TEXT_FILE [PTSIZE]
 *
 * Form feeds in the text file separate pages; each line becomes one line
 * of DejaVu Sans on a US Letter page, so the PDF's text layer holds
 * exactly the file's words.
 */
#include <cairo-pdf.h>
#include <cairo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
/* fontconfig keeps its caches until exit; they are not this tool's leaks. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }
#endif

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s OUT.pdf TEXT_FILE [PTSIZE]\n", argv[0]);
        return 2;
    }
    double pt = argc > 3 ? atof(argv[3]) : 12;
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    cairo_surface_t *s = cairo_pdf_surface_create(argv[1], 612, 792);
    cairo_t *cr = cairo_create(s);
    cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, pt);
    char line[4096];
    double y = 72;
    while (fgets(line, sizeof line, f)) {
        char *ff = strchr(line, '\f');
        if (ff) {
            cairo_show_page(cr);
            y = 72;
            memmove(line, ff + 1, strlen(ff + 1) + 1);
        }
        line[strcspn(line, "\r\n")] = 0;
        if (line[0]) {
            cairo_move_to(cr, 72, y);
            cairo_show_text(cr, line);
        }
        y += pt * 1.4;
    }
    fclose(f);
    cairo_destroy(cr);
    cairo_surface_finish(s);
    int bad = cairo_surface_status(s) != CAIRO_STATUS_SUCCESS;
    if (bad)
        fprintf(stderr, "cairo: %s\n", cairo_status_to_string(cairo_surface_status(s)));
    cairo_surface_destroy(s);
    return bad;
}
