/* formats.c — the table of dataset formats and the kind queries answered from it (load_split.c loads a split through
 * the loader a row names). */
#include "data/formats.h"

#include "core/error.h"

#include <stdio.h>
#include <string.h>

static int32_t cifar100_classes(const sf_data_params *p) { return p->coarse_labels ? 20 : 100; }
static int32_t imagefolder_classes(const sf_data_params *p) { return p->images.classes; }
static int32_t ncaltech101_classes(const sf_data_params *p) { return p->background_class ? 102 : 101; }

static const sf_dataset_format formats[] = {
    [SF_DATASET_FASHION_MNIST] =
        {.name = "fashion-mnist", .pretty = "Fashion-MNIST", .default_dir = "/usr/share/datasets/fashion-mnist",
         .channels = 1, .height = 28, .width = 28, .classes = 10, .mean = {0.2860f}, .std = {0.3530f},
         .provider = "install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist), or "
                     "set data_dir to a directory holding the files of "
                     "https://github.com/zalandoresearch/fashion-mnist",
         .load = sf_idx_load},
    [SF_DATASET_MNIST] =
        {.name = "mnist", .pretty = "MNIST", .default_dir = "data/mnist", .channels = 1, .height = 28, .width = 28,
         .classes = 10, .mean = {0.1307f}, .std = {0.3081f},
         .provider = "download train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz "
                     "and t10k-labels-idx1-ubyte.gz from https://ossci-datasets.s3.amazonaws.com/mnist/ (a mirror "
                     "of http://yann.lecun.com/exdb/mnist/) into data_dir",
         .load = sf_idx_load},
    [SF_DATASET_CIFAR10] =
        {.name = "cifar10", .pretty = "CIFAR-10", .default_dir = "data/cifar-10-batches-bin", .channels = 3,
         .height = 32, .width = 32, .classes = 10, .augment_auto = 1, .mean = {0.4914f, 0.4822f, 0.4465f},
         .std = {0.2470f, 0.2435f, 0.2616f},
         .provider = "download https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz and unpack it with tar xzf, "
                     "then set data_dir to the cifar-10-batches-bin directory (or the one holding it)",
         .load = sf_cifar_load},
    [SF_DATASET_SYNTHETIC] =
        {.name = "synthetic", .pretty = "synthetic", .default_dir = "",
         .provider = "nothing: synthetic data is drawn from the seed", .load = sf_synthetic_load},
    [SF_DATASET_SHD] =
        {.name = "shd", .pretty = "SHD", .default_dir = "data/shd", .channels = 1, .height = 1, .width = 700,
         .classes = 20, .events = 1, .augment_auto = 1,
         .provider = "download shd_train.h5.gz and shd_test.h5.gz from https://zenkelab.org/datasets/ (Cramer et "
                     "al. 2020, the Spiking Heidelberg Digits) into data_dir (they are read gzipped or not)",
         .load = sf_shd_load},
    [SF_DATASET_SSC] =
        {.name = "ssc", .pretty = "SSC", .default_dir = "data/ssc", .channels = 1, .height = 1, .width = 700,
         .classes = 35, .events = 1, .augment_auto = 1,
         .provider = "download ssc_train.h5.gz and ssc_test.h5.gz from https://zenkelab.org/datasets/ (Cramer et "
                     "al. 2020, the Spiking Speech Commands) into data_dir (they are read gzipped or not)",
         .load = sf_shd_load},
    [SF_DATASET_NMNIST] =
        {.name = "nmnist", .pretty = "N-MNIST", .default_dir = "data/N-MNIST", .channels = 2, .height = 34,
         .width = 34, .classes = 10, .events = 1, .augment_auto = 1,
         .provider = "download Train.zip and Test.zip of N-MNIST (Orchard et al. 2015) from "
                     "https://www.garrickorchard.com/datasets/n-mnist into data_dir (read as they are, or unzipped "
                     "there: data_dir/Train/0 ... data_dir/Test/9)",
         .load = sf_nmnist_load},
    [SF_DATASET_DVSGESTURE] =
        {.name = "dvsgesture", .pretty = "DVS128 Gesture", .default_dir = "data/DvsGesture", .channels = 2,
         .height = 128, .width = 128, .classes = 11, .events = 1, .augment_auto = 1,
         .provider = "download DvsGesture.tar.gz (Amir et al. 2017) from https://research.ibm.com/interactive/"
                     "dvsgesture/ and unpack it with tar xzf into data_dir (the folder of the .aedat files, "
                     "their _labels.csv files and trials_to_train.txt / trials_to_test.txt, or the one holding it)",
         .load = sf_gesture_load},
    [SF_DATASET_CIFAR100] =
        {.name = "cifar100", .pretty = "CIFAR-100", .default_dir = "data/cifar-100-binary", .channels = 3,
         .height = 32, .width = 32, .classes = 100, .classes_of = cifar100_classes, .augment_auto = 1,
         .mean = {0.5071f, 0.4865f, 0.4409f}, .std = {0.2673f, 0.2564f, 0.2762f},
         .provider = "download https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz and unpack it with tar xzf, "
                     "then set data_dir to the cifar-100-binary directory (or the one holding it)",
         .load = sf_cifar100_load},
    [SF_DATASET_IMAGEFOLDER] =
        {.name = "imagefolder", .pretty = "image folder", .default_dir = "data/imagenet", .channels = 3,
         .classes_of = imagefolder_classes, .augment_auto = 1, .mean = {0.485f, 0.456f, 0.406f},
         .std = {0.229f, 0.224f, 0.225f},
         .provider = "set data_dir to a folder holding train/<class>/ and val/ folders of JPEG or PNG images, val/ "
                     "with the same class folders or flat with val_labels naming each image's class (ImageNet: "
                     "ILSVRC2012_img_train.tar unpacked into train/ with each class's tar into its folder, "
                     "ILSVRC2012_img_val.tar into val/)",
         .load = sf_imagefolder_load},
    [SF_DATASET_CIFAR10DVS] =
        {.name = "cifar10dvs", .pretty = "CIFAR10-DVS", .default_dir = "data/CIFAR10-DVS", .channels = 2,
         .height = 128, .width = 128, .classes = 10, .events = 1, .augment_auto = 1,
         .provider = "download the ten archives airplane.zip ... truck.zip of CIFAR10-DVS (Li et al. 2017) from "
                     "https://figshare.com/articles/dataset/CIFAR10-DVS_New/4724671 and unzip them into data_dir "
                     "(one folder of .aedat files per class)",
         .load = sf_cifar10dvs_load},
    [SF_DATASET_NCALTECH101] =
        {.name = "ncaltech101", .pretty = "N-Caltech101", .default_dir = "data/N-Caltech101", .channels = 2,
         .height = 180, .width = 240, .classes = 101, .classes_of = ncaltech101_classes, .events = 1,
         .augment_auto = 1,
         .provider = "download Caltech101.zip of N-Caltech101 (Orchard et al. 2015) from "
                     "https://www.garrickorchard.com/datasets/n-caltech101 and unzip it into data_dir (it unpacks "
                     "to Caltech101/<class>/image_NNNN.bin)",
         .load = sf_ncaltech101_load},
};
_Static_assert(sizeof formats / sizeof formats[0] == SF_DATASET_NUM_KINDS, "one format row per sf_dataset_kind");

/* The row of a kind; out-of-range kinds read the first one, so the queries below never index past the table. */
static const sf_dataset_format *format_of(sf_dataset_kind kind)
{
    return &formats[(unsigned)kind < SF_DATASET_NUM_KINDS ? kind : 0];
}

const sf_dataset_format *sf_dataset_format_of(sf_dataset_kind kind)
{
    return (unsigned)kind < SF_DATASET_NUM_KINDS ? &formats[kind] : NULL;
}

int sf_dataset_kind_augments(sf_dataset_kind kind) { return format_of(kind)->augment_auto; }

int sf_dataset_kind_images(sf_dataset_kind kind) { return format_of(kind)->channels > 0 && !format_of(kind)->events; }
int sf_dataset_kind_is_events(sf_dataset_kind kind) { return format_of(kind)->events; }

void sf_dataset_kind_list(char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < SF_DATASET_NUM_KINDS && n < cap; i++) {
        const char *sep = i == 0 ? "" : i + 1 < SF_DATASET_NUM_KINDS ? ", " : " or ";
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", sep, formats[i].name);
    }
}

sf_status sf_dataset_kind_parse(const char *name, sf_dataset_kind *out)
{
    for (int i = 0; i < SF_DATASET_NUM_KINDS; i++)
        if (name && strcmp(name, formats[i].name) == 0) {
            *out = (sf_dataset_kind)i;
            return SF_OK;
        }
    char list[512];
    sf_dataset_kind_list(list, sizeof list);
    return sf_fail(SF_ERR_INVALID, "expects %s", list);
}

const char *sf_dataset_kind_name(sf_dataset_kind kind)
{
    return (unsigned)kind < SF_DATASET_NUM_KINDS ? formats[kind].name : "?";
}

const char *sf_dataset_default_dir(sf_dataset_kind kind)
{
    return (unsigned)kind < SF_DATASET_NUM_KINDS ? formats[kind].default_dir : "";
}

void sf_data_default_params(sf_data_params *p)
{
    *p = (sf_data_params){.synthetic = {.shape = {1, 28, 28}, .classes = 10, .samples = 1024, .density = 0.1f},
                          .events = {.downsample = 1}, .images = {.size = 224, .classes = 10}};
}

void sf_data_input_shape(sf_dataset_kind kind, const sf_data_params *p, int32_t shape[3], int32_t *classes)
{
    const sf_dataset_format *f = format_of(kind);
    if (f->channels == 0) {
        for (int i = 0; i < 3; i++) shape[i] = p->synthetic.shape[i];
        *classes = p->synthetic.classes;
        return;
    }
    *classes = sf_format_classes(f, p);
    if (f->events) {
        int32_t frame[3];
        sf_event_frame_shape(f->channels, f->height, f->width, &p->events, frame);
        sf_event_input_shape(frame, shape);
        return;
    }
    shape[0] = f->channels;
    shape[1] = f->height ? f->height : p->images.size; /* image folders: square crops of image_size */
    shape[2] = f->width ? f->width : p->images.size;
}

void sf_dataset_kind_stats(sf_dataset_kind kind, float mean[SF_DATASET_MAX_CHANNELS],
                           float std[SF_DATASET_MAX_CHANNELS])
{
    const sf_dataset_format *f = format_of(kind);
    for (int c = 0; c < SF_DATASET_MAX_CHANNELS; c++) {
        mean[c] = c < f->channels && f->std[c] > 0.0f ? f->mean[c] : 0.0f;
        std[c] = c < f->channels && f->std[c] > 0.0f ? f->std[c] : 1.0f;
    }
}
