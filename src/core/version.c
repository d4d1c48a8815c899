/* version.c — the library version. */
#include "spikefuse.h"

#define SF_STR2(x) #x
#define SF_STR(x) SF_STR2(x)

const char *sf_version(void)
{
    return SF_STR(SF_VERSION_MAJOR) "." SF_STR(SF_VERSION_MINOR) "." SF_STR(SF_VERSION_PATCH);
}
