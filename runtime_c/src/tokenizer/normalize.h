/*
 * normalize.h — Unicode NFC, as Hugging Face's `NFC` normalizer applies it
 * to each piece of text between added tokens (Qwen2 and its descendants).
 */
#ifndef ER_NORMALIZE_H
#define ER_NORMALIZE_H

#include <stddef.h>
#include <stdint.h>

/* Scratch er_nfc needs besides its output, for len input bytes. */
size_t er_nfc_work_bytes(size_t len);

/* Writes NFC(in[0..len)) to out and returns its length. `out` must hold
 * 3*len + 8 bytes (NFC grows text at most threefold) and `work`
 * er_nfc_work_bytes(len) bytes (4-byte aligned; linear in len). Bytes that are not valid
 * UTF-8 pass through unchanged and block composition, like a starter that
 * composes with nothing. */
size_t er_nfc(const char *in, size_t len, char *out, uint32_t *work);

/* Generated data (nfc_tables.c). */
extern const char er_nfc_version[];
extern const uint32_t er_nfc_ccc[][3];
extern const size_t er_nfc_ccc_n;
extern const uint32_t er_nfc_decomp[][3];
extern const size_t er_nfc_decomp_n;
extern const uint32_t er_nfc_pool[];
extern const uint32_t er_nfc_comp[][3];
extern const size_t er_nfc_comp_n;

#endif
