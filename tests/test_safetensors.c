/* test_safetensors.c — the safetensors parser on hostile headers (the cases fuzzing found or that border them),
 * a write/read round trip, and the CRC-32 record that every load checks. */
#include "io/safetensors.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A file of the given JSON header followed by `data_len` bytes 0, 1, 2, ... */
static uint8_t *file_of(const char *header, size_t data_len, size_t *len)
{
    size_t h = strlen(header);
    *len = 8 + h + data_len;
    uint8_t *b = malloc(*len);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < data_len; i++) b[8 + h + i] = (uint8_t)i;
    return b;
}

static void expect_format_error(const char *header, size_t data_len, const char *needle)
{
    size_t len;
    uint8_t *b = file_of(header, data_len, &len);
    sf_safetensors *st = NULL;
    sf_status s = sf_safetensors_parse(b, len, &st);
    CHECK(s == SF_ERR_FORMAT && st == NULL, "%s: status %s", header, sf_status_str(s));
    CHECK(strstr(sf_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", header, sf_last_error(), needle);
    sf_safetensors_free(st);
    free(b);
}

static void test_hostile_headers(void)
{
    expect_format_error("{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]},"
                        "\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[3,11]}}",
                        11, "tensor 'a' appears twice");
    expect_format_error("{\"__metadata__\":{\"k\":\"v\"},\"__metadata__\":{\"k\":\"w\"}}", 0,
                        "__metadata__ appears twice");
    expect_format_error("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0.5,2.5]}}", 3, "data_offsets");
    expect_format_error("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,1e400]}}", 3, "data_offsets");
    expect_format_error("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 3, "outside the file");
    expect_format_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8, "disagree");
    expect_format_error("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 8, "unsupported dtype");
    size_t len;
    uint8_t *b = file_of("{}", 0, &len);
    b[0] = 0xff; /* a header length beyond the file */
    sf_safetensors *st = NULL;
    CHECK(sf_safetensors_parse(b, len, &st) == SF_ERR_FORMAT && !st, "header length beyond the file");
    CHECK(sf_safetensors_parse(b, 7, &st) == SF_ERR_FORMAT && !st, "shorter than the length field");
    free(b);
}

static void test_round_trip(void)
{
    sf_st_writer *w = NULL;
    CHECK_OK(sf_st_writer_create(&w));
    if (!w) return;
    const float f[6] = {1, -2, 3.5f, 0, 1e-30f, 7};
    const int64_t shape[2] = {2, 3}, one = 3;
    const uint8_t u[3] = {0, 1, 255};
    CHECK_OK(sf_st_writer_add(w, "w", SF_DT_F32, 2, shape, f));
    CHECK_OK(sf_st_writer_add(w, "u", SF_DT_U8, 1, &one, u));
    CHECK_OK(sf_st_writer_meta(w, "config", "[train]\ndataset = mnist\n"));
    char path[] = "/tmp/sf_test_safetensors_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) close(fd);
    CHECK_OK(sf_st_writer_save(w, path));
    sf_st_writer_free(w);
    sf_safetensors *st = NULL;
    CHECK_OK(sf_safetensors_load(path, &st));
    unlink(path);
    if (!st) return;
    float back[6];
    double ub[3];
    CHECK_OK(sf_safetensors_get_f32(st, "w", back, 6));
    CHECK(memcmp(back, f, sizeof f) == 0, "float32 tensor reads back bitwise");
    CHECK_OK(sf_safetensors_get_f64(st, "u", ub, 3));
    CHECK(ub[0] == 0 && ub[1] == 1 && ub[2] == 255, "u8 tensor reads back");
    CHECK(sf_safetensors_get_f32(st, "w", back, 5) == SF_ERR_FORMAT, "a wrong element count is refused");
    const char *m = sf_safetensors_meta(st, "config");
    CHECK(m && strcmp(m, "[train]\ndataset = mnist\n") == 0, "metadata reads back");
    m = sf_safetensors_meta(st, SF_ST_CRC_KEY);
    CHECK(m && strstr(m, "\"w\":\"") && strstr(m, "\"u\":\""), "the writer records a CRC-32 per tensor: %s", m ? m : "none");
    sf_safetensors_free(st);
}

/* Data bytes 0..3 have CRC-32 8bb98613 (zlib.crc32(bytes(range(4)))). */
static void test_crc(void)
{
#define T4 "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}"
    size_t len;
    uint8_t *b = file_of("{\"__metadata__\":{\"crc32\":\"{\\\"a\\\":\\\"8bb98613\\\"}\"}," T4 "}", 4, &len);
    sf_safetensors *st = NULL;
    CHECK_OK(sf_safetensors_parse(b, len, &st));
    sf_safetensors_free(st);
    b[len - 1] ^= 1;
    CHECK(sf_safetensors_parse(b, len, &st) == SF_ERR_FORMAT && !st &&
              strstr(sf_last_error(), "tensor 'a' is damaged"),
          "a changed byte fails the CRC-32: %s", sf_last_error());
    free(b);
    expect_format_error("{\"__metadata__\":{\"crc32\":\"[1]\"}," T4 "}", 4, "is not a JSON object of CRC-32s");
    expect_format_error("{\"__metadata__\":{\"crc32\":\"{}\"}," T4 "}", 4, "lists 0 tensors, the file holds 1");
    expect_format_error("{\"__metadata__\":{\"crc32\":\"{\\\"b\\\":\\\"8bb98613\\\"}\"}," T4 "}", 4,
                        "tensor 'a' has no CRC-32");
    expect_format_error("{\"__metadata__\":{\"crc32\":\"{\\\"a\\\":\\\"8bb9861\\\"}\"}," T4 "}", 4,
                        "tensor 'a' has no CRC-32");
#undef T4
    sf_st_writer *w = NULL;
    CHECK_OK(sf_st_writer_create(&w));
    if (!w) return;
    CHECK(sf_st_writer_meta(w, SF_ST_CRC_KEY, "{}") == SF_ERR_INVALID, "the CRC-32 key is the writer's own");
    sf_st_writer_free(w);
}

int main(void)
{
    test_hostile_headers();
    test_round_trip();
    test_crc();
    return tu_finish("test_safetensors");
}
