/* net_slots.c — where the planned buffers are: the address of a slot in its arena and of a tensor's forward values
 * (below every file that runs layers, so that they call it without calling each other). */
#include "core/net_internal.h"

void *sf_net_slot_ptr(const sf_net *net, sf_slot s)
{
    switch (s.where) {
    case SF_ARENA_SAVED: return (char *)net->saved_mem + s.offset;
    case SF_ARENA_WORK: return (char *)net->work_mem + s.offset;
    case SF_ARENA_NONE: break;
    }
    return NULL;
}

float *sf_net_act(sf_net *net, int32_t id) { return sf_net_slot_ptr(net, net->tensors[net->tensors[id].alias_of].act); }
