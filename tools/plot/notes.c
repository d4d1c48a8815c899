/* notes.c — collecting what could not be drawn and why (shown on the report page and printed by `plot`). */
#include "plot/run.h"

#include <stdarg.h>
#include <stdio.h>

void sf_note(sf_notes *notes, const char *fmt, ...)
{
    if (!notes || notes->n >= SF_NOTES_MAX) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes->text[notes->n++], sizeof notes->text[0], fmt, ap);
    va_end(ap);
}
