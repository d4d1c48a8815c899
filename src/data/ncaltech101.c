/* ncaltech101.c — N-Caltech101 (Orchard et al. 2015): Caltech101's images seen by an ATIS in three saccades,
 * Caltech101/<class>/image_NNNN.bin in N-MNIST's 5-byte event format (nmnist.c), 101 object classes in folder name
 * order and BACKGROUND_Google, a class only when asked for. The sensor is taken as 240×180, the area the
 * recordings cover (events kept where they are). */
#include "data/formats.h"

sf_status sf_ncaltech101_load(const sf_dataset_format *f, const char *dir, sf_split split, const sf_data_params *p,
                              sf_dataset **out)
{
    const sf_event_folders e = {.unpacked = "Caltech101", .suffix = ".bin", .bytes_per_event = SF_NMNIST_EVENT_BYTES,
                                .parse = sf_nmnist_parse, .excluded = p->background_class ? NULL : "BACKGROUND_Google"};
    return sf_event_folders_load(f, &e, dir, split, sf_format_classes(f, p), out);
}
