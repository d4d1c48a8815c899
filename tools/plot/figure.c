/* figure.c — rendering a figure with cairo: an image surface written as PNG, an SVG surface streamed to memory. */
#include "plot/figure.h"

#include "spikefuse_train.h"
#include "plot/style.h"

#include <cairo-svg.h>
#include <stdio.h>

sf_figure *sf_figure_add(sf_figure_list *list, const char *name, void (*draw)(cairo_t *, const sf_figure *),
                         const sf_plot_data *data, int32_t item)
{
    if (list->n >= SF_FIGURES_MAX) return NULL;
    sf_figure *f = &list->fig[list->n++];
    *f = (sf_figure){.draw = draw, .data = data, .item = item};
    snprintf(f->name, sizeof f->name, "%s", name);
    return f;
}

static sf_status render(const sf_figure *f, cairo_surface_t *surface)
{
    cairo_t *cr = cairo_create(surface);
    f->draw(cr, f);
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    /* an SVG document is complete only when its surface is finished; an image must stay open to be written */
    if (cairo_surface_get_type(surface) == CAIRO_SURFACE_TYPE_SVG) cairo_surface_finish(surface);
    else cairo_surface_flush(surface);
    if (cs == CAIRO_STATUS_SUCCESS) cs = cairo_surface_status(surface);
    return cs == CAIRO_STATUS_SUCCESS ? SF_OK
                                      : sf_fail(SF_ERR_IO, "drawing %s: %s", f->name, cairo_status_to_string(cs));
}

static cairo_status_t to_atomic_file(void *closure, const unsigned char *data, unsigned int length)
{
    return sf_atomic_file_write(closure, data, length) == SF_OK ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

sf_status sf_figure_png(const sf_figure *f, const char *path)
{
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, SF_FIG_W, SF_FIG_H);
    sf_status s = render(f, img);
    sf_atomic_file file;
    if (s == SF_OK) s = sf_atomic_file_open(&file, path);
    if (s == SF_OK) {
        cairo_status_t cs = cairo_surface_write_to_png_stream(img, to_atomic_file, &file);
        if (cs != CAIRO_STATUS_SUCCESS && file.status == SF_OK)
            file.status = sf_fail(SF_ERR_IO, "writing %s: %s", path, cairo_status_to_string(cs));
        s = sf_atomic_file_commit(&file);
    }
    cairo_surface_destroy(img);
    return s;
}

static cairo_status_t to_buffer(void *closure, const unsigned char *data, unsigned int length)
{
    sf_buf *b = closure;
    sf_buf_append(b, data, length);
    return b->failed ? CAIRO_STATUS_NO_MEMORY : CAIRO_STATUS_SUCCESS;
}

sf_status sf_figure_svg(const sf_figure *f, sf_buf *out)
{
    cairo_surface_t *svg = cairo_svg_surface_create_for_stream(to_buffer, out, SF_FIG_W, SF_FIG_H);
    cairo_svg_surface_set_document_unit(svg, CAIRO_SVG_UNIT_PX);
    sf_status s = render(f, svg);
    cairo_surface_destroy(svg);
    if (s == SF_OK && out->failed) s = sf_fail(SF_ERR_NOMEM, "out of memory drawing %s", f->name);
    return s;
}
