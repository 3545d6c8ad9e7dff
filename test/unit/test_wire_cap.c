/* test_wire_cap.c - the capability blob of proto/wire_cap.c: round trip,
 * the byte layout proto/FORMAT.md "Capabilities" documents, and every way
 * a blob may be wrong (length, version, reserved bits, any flipped bit,
 * another secret's key). */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "wire.h"

static const struct wire_cap sample = {
	.flags = WIRE_CAP_F_WRITE,
	.session = 0x1122334455667788ull,
	.ino = 0x0102030405060708ull,
	.trunc_gen = 7,
	.expiry_ms = 1700000000123ull,
};

static void key_of(const char *secret, uint8_t key[WIRE_CAP_KEY_LEN])
{
	cr_assert_eq(wire_cap_key(secret, key), 0);
}

Test(wire_cap, round_trip_and_layout)
{
	uint8_t key[WIRE_CAP_KEY_LEN], blob[WIRE_CAP_LEN];
	struct wire_cap out;

	key_of("s3cret", key);
	cr_assert_eq(wire_cap_seal(key, &sample, blob), 0);
	/* The documented layout, little-endian. */
	cr_assert_eq(blob[0], WIRE_CAP_VERSION);
	cr_assert_eq(blob[1], WIRE_CAP_F_WRITE);
	cr_assert_eq(blob[2], 0);
	cr_assert_eq(blob[3], 0);
	cr_assert_eq(blob[4], 0x88);
	cr_assert_eq(blob[11], 0x11);
	cr_assert_eq(blob[12], 0x08);
	cr_assert_eq(blob[20], 7);
	cr_assert_eq(blob[28], (uint8_t)(1700000000123ull & 0xff));
	memset(&out, 0, sizeof(out));
	cr_assert_eq(wire_cap_open(key, blob, sizeof(blob), &out), 0);
	cr_assert_eq(out.flags, sample.flags);
	cr_assert_eq(out.session, sample.session);
	cr_assert_eq(out.ino, sample.ino);
	cr_assert_eq(out.trunc_gen, sample.trunc_gen);
	cr_assert_eq(out.expiry_ms, sample.expiry_ms);
}

Test(wire_cap, every_flipped_bit_is_refused)
{
	uint8_t key[WIRE_CAP_KEY_LEN], blob[WIRE_CAP_LEN], bad[WIRE_CAP_LEN];
	struct wire_cap out;

	key_of("s3cret", key);
	cr_assert_eq(wire_cap_seal(key, &sample, blob), 0);
	for (unsigned i = 0; i < WIRE_CAP_LEN * 8; i++) {
		int rc;

		memcpy(bad, blob, sizeof(bad));
		bad[i / 8] ^= (uint8_t)(1u << (i % 8));
		rc = wire_cap_open(key, bad, sizeof(bad), &out);
		cr_assert(rc == -EBADMSG || rc == -EPROTO,
			  "bit %u flipped: rc %d", i, rc);
		/* A bit of the body the format leaves free is a MAC
		 * mismatch; the version and reserved bytes are not a cap. */
		if (i / 8 >= 4 && i / 8 < WIRE_CAP_BODY_LEN)
			cr_assert_eq(rc, -EBADMSG, "bit %u", i);
	}
}

Test(wire_cap, another_secret_or_shape_is_refused)
{
	uint8_t key[WIRE_CAP_KEY_LEN], other[WIRE_CAP_KEY_LEN];
	uint8_t blob[WIRE_CAP_LEN + 1];
	struct wire_cap out, odd = sample;

	key_of("s3cret", key);
	key_of("s3cret2", other);
	cr_assert_eq(wire_cap_seal(key, &sample, blob), 0);
	cr_assert_eq(wire_cap_open(other, blob, WIRE_CAP_LEN, &out), -EBADMSG);
	/* Absent (protobuf-c: NULL, 0), short, long. */
	cr_assert_eq(wire_cap_open(key, NULL, 0, &out), -EPROTO);
	cr_assert_eq(wire_cap_open(key, blob, WIRE_CAP_LEN - 1, &out), -EPROTO);
	blob[WIRE_CAP_LEN] = 0;
	cr_assert_eq(wire_cap_open(key, blob, WIRE_CAP_LEN + 1, &out), -EPROTO);
	/* Unknown flag bits are never sealed. */
	odd.flags = 0xff;
	cr_assert_eq(wire_cap_seal(key, &odd, blob), 0);
	cr_assert_eq(blob[1], WIRE_CAP_F_KNOWN);
	cr_assert_eq(wire_cap_open(key, blob, WIRE_CAP_LEN, &out), 0);
	/* No secret, no key. */
	cr_assert_eq(wire_cap_key("", key), -EINVAL);
	cr_assert_eq(wire_cap_key(NULL, key), -EINVAL);
}

Test(wire_cap, realtime_is_sane)
{
	/* After 2020-01-01 and before 2100: the clock expiry_ms is read on. */
	uint64_t now = wire_realtime_ms();

	cr_assert_gt(now, 1577836800000ull);
	cr_assert_lt(now, 4102444800000ull);
}
