/* batchnorm.h — what batchnorm.c offers the kinds that run a batch norm inside their own kernels (lif.c). */
#ifndef SF_CORE_LAYERS_BATCHNORM_H
#define SF_CORE_LAYERS_BATCHNORM_H

#include "core/net_internal.h"

/* The BN shape of tensor t over `rows` rows (T·B, or sf_net_bn_rows): [rows, c, hw], or for an NHWC tensor
 * [rows·hw, c, 1], which every BN kernel indexes alike (channel = element index mod c). */
sf_bn_shape sf_net_bn_shape(const sf_net *net, int32_t t, int64_t rows);
/* The statistics a forward of BN layer bn normalises with: the batch's in training, the running ones otherwise. */
void sf_batchnorm_stats(sf_net *net, const sf_net_layer *bn, bool training, const float **mean, const float **var);

#endif
