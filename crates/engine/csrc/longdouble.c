/*
 * 80-bit long double arithmetic for INCRBYFLOAT and HINCRBYFLOAT.
 *
 * Rust has no long double, and Redis computes these commands in it on
 * x86-64; to answer byte for byte we parse, add and format here with the
 * C library, following Redis's string2ld / ld2string(LD_STR_HUMAN) rules.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Redis's MAX_LONG_DOUBLE_CHARS: longer inputs are not numbers. */
#define SLUICE_LD_CHARS (5 * 1024)

/* Result codes shared with crates/engine/src/ldouble.rs. */
#define SLUICE_LD_BAD_CURRENT (-1)
#define SLUICE_LD_BAD_INCR (-2)
#define SLUICE_LD_NOT_FINITE (-3)
#define SLUICE_LD_NO_ROOM (-4)

/* Parses like Redis's string2ld: all of the bytes (an embedded NUL
 * fails), no leading space, no NaN, no overflow to ±HUGE_VAL
 * or underflow to 0. Returns 1 on success. */
static int parse_ld(const char *s, size_t len, long double *out) {
    char buf[SLUICE_LD_CHARS];
    char *end;
    long double v;

    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    v = strtold(buf, &end);
    if (isspace((unsigned char)buf[0]) || end[0] != '\0' || (size_t)(end - buf) != len ||
        (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || v == 0)) ||
        errno == EINVAL || isnan(v))
        return 0;
    *out = v;
    return 1;
}

/* Formats like Redis's ld2string(LD_STR_HUMAN): "%.17Lf" with trailing
 * zeros (and a trailing dot) removed, "-0" as "0". Returns the length or
 * SLUICE_LD_NO_ROOM. */
static int format_ld(long double v, char *out, size_t outlen) {
    int l;

    if (isinf(v)) {
        if (outlen < 5) return SLUICE_LD_NO_ROOM;
        if (v > 0) {
            memcpy(out, "inf", 3);
            return 3;
        }
        memcpy(out, "-inf", 4);
        return 4;
    }
    l = snprintf(out, outlen, "%.17Lf", v);
    if (l < 0 || (size_t)l + 1 > outlen) return SLUICE_LD_NO_ROOM;
    if (memchr(out, '.', (size_t)l) != NULL) {
        while (out[l - 1] == '0') l--;
        if (out[l - 1] == '.') l--;
    }
    if (l == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        l = 1;
    }
    return l;
}

/* Checks a number as string2ld would: 1 finite, 0 NaN or infinite (only
 * infinity can parse), -1 not a valid float. */
int sluice_ld_check(const char *s, size_t len) {
    long double v;
    if (!parse_ld(s, len, &v)) return -1;
    return isinf(v) ? 0 : 1;
}

/* cur (NULL: a missing value, 0) + incr, written to out in Redis's human
 * form. Returns the length written or a negative SLUICE_LD_* code. */
int sluice_incrbyfloat(const char *cur, size_t curlen, const char *incr, size_t incrlen,
                       char *out, size_t outlen) {
    long double value = 0, by;

    if (cur != NULL && !parse_ld(cur, curlen, &value)) return SLUICE_LD_BAD_CURRENT;
    if (!parse_ld(incr, incrlen, &by)) return SLUICE_LD_BAD_INCR;
    value += by;
    if (isnan(value) || isinf(value)) return SLUICE_LD_NOT_FINITE;
    return format_ld(value, out, outlen);
}

/* A blocking command's timeout in seconds, as Redis 7.0 converts it:
 * parsed as a long double, times 1000, rounded up (ceill: `0.001` is
 * 0.99999999999999999995 ms in long double and must not become 0, which
 * means "forever"; any positive fraction of a millisecond is 1 ms, while
 * `-0.001` rounds up to 0 and blocks forever, as in Redis) and converted
 * to long long (x86-64
 * turns out-of-range values, infinities included, into LLONG_MIN, which
 * then reads as "negative"). Returns 0 and sets *ms, or -1 when the
 * argument is not a float. */
int sluice_timeout_ms(const char *s, size_t len, long long *ms) {
    long double v;
    if (!parse_ld(s, len, &v)) return -1;
    long double scaled = ceill(v * 1000.0L);
    if (!(scaled >= -9223372036854775808.0L && scaled < 9223372036854775808.0L))
        *ms = (long long)0x8000000000000000ULL;
    else
        *ms = (long long)scaled;
    return 0;
}

/* A double printed as Redis's addReplyHumanLongDouble prints it
 * (ld2string(LD_STR_HUMAN) of the value promoted to long double). */
int sluice_ld_format_double(double v, char *out, size_t outlen) {
    return format_ld((long double)v, out, outlen);
}
