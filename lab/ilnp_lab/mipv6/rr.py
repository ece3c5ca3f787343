"""Return routability (RFC 6275 §5.2): the correspondent's key Kcn and nonce table, keygen
tokens, the binding management key Kbm and the Binding Authorization Data authenticator.

    home keygen token    = First(64, HMAC_SHA1(Kcn, home address | nonce | 0))     §5.2.5
    care-of keygen token = First(64, HMAC_SHA1(Kcn, care-of address | nonce | 1))
    Kbm                  = SHA1(home keygen token | care-of keygen token)        §5.2.5
                           (SHA1(home keygen token) for a deregistration)
    Authenticator        = First(96, HMAC_SHA1(Kbm, care-of address | correspondent | MH))
                           with the MH's checksum zero, up to the authenticator  §6.2.7

Kcn is 20 random octets, nonces 8 (§5.2.3); a nonce is kept MAX_NONCE_LIFETIME (240 s), a
token MAX_TOKEN_LIFETIME (210 s) (§12). The CN regenerates a nonce every ~30 s as UMIP does.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time

import struct

from .mh import (BA_EXPIRED_COA_NONCE, BA_EXPIRED_HOME_NONCE, BA_EXPIRED_NONCES, FIXED, OPT_AUTH, OPT_PAD1,
                 a16)

MAX_NONCE_LIFETIME = 240.0
MAX_TOKEN_LIFETIME = 210.0
MAX_RR_BINDING_LIFETIME = 420.0
NONCE_REGEN = 30.0


def first(n_bits: int, b: bytes) -> bytes:
    return b[:n_bits // 8]


def keygen_token(kcn: bytes, addr, nonce: bytes, careof: bool) -> bytes:
    return first(64, hmac.new(kcn, a16(addr) + nonce + bytes([1 if careof else 0]), hashlib.sha1).digest())


def kbm(home_token: bytes, careof_token: bytes | None) -> bytes:
    return hashlib.sha1(home_token + (careof_token or b"")).digest()


def authenticator(kbm_key: bytes, coa, cn, mh_upto_auth: bytes) -> bytes:
    """mh_upto_auth: the MH with checksum zero, ending with the BAD option's type and length
    octets (the 12 authenticator octets left out, §6.2.7)."""
    mh = mh_upto_auth[:4] + b"\0\0" + mh_upto_auth[6:]
    return first(96, hmac.new(kbm_key, a16(coa) + a16(cn) + mh, hashlib.sha1).digest())


def authenticate(msg, kbm_key: bytes, coa, cn) -> None:
    """Fills in the Binding Authorization Data option of `msg` (a BU or BA whose last option is
    auth_data(bytes(12))) for (coa, cn)."""
    opt = msg.option(OPT_AUTH)
    opt.data = bytes(12)
    raw = msg.encode()
    # the authenticator is the last option: skip any padding after it
    end = _auth_end(raw)
    opt.data = authenticator(kbm_key, coa, cn, raw[:end - 12])


def verify(msg_bytes: bytes, kbm_key: bytes, coa, cn) -> bool:
    end = _auth_end(msg_bytes)
    if end is None:
        return False
    want = authenticator(kbm_key, coa, cn, msg_bytes[:end - 12])
    return hmac.compare_digest(want, msg_bytes[end - 12:end])


def _auth_end(raw: bytes) -> int | None:
    """Offset just past the Binding Authorization Data option's 12 octets."""
    i = 6 + struct.calcsize(FIXED[raw[2]][0])
    while i < len(raw):
        if raw[i] == OPT_PAD1:
            i += 1
            continue
        if raw[i] == OPT_AUTH:
            return i + 2 + 12
        i += 2 + raw[i + 1]
    return None


class Correspondent:
    """The CN's side: Kcn, a window of nonces by index, tokens for HoTI/CoTI."""

    def __init__(self, kcn: bytes | None = None, clock=time.monotonic):
        self.kcn = kcn or os.urandom(20)
        self.clock = clock
        self.nonces: dict[int, tuple[bytes, float]] = {}
        self.index = 0
        self._new_nonce()

    def _new_nonce(self) -> None:
        self.index = (self.index + 1) & 0xFFFF
        self.nonces[self.index] = (os.urandom(8), self.clock())

    def current(self) -> tuple[int, bytes]:
        now = self.clock()
        if now - self.nonces[self.index][1] >= NONCE_REGEN:
            self._new_nonce()
        for i, (_, t) in list(self.nonces.items()):
            if now - t > MAX_NONCE_LIFETIME:
                del self.nonces[i]
        return self.index, self.nonces[self.index][0]

    def nonce(self, index: int) -> bytes | None:
        n = self.nonces.get(index)
        if n is None or self.clock() - n[1] > MAX_NONCE_LIFETIME:
            return None
        return n[0]

    def home_token(self, home) -> tuple[int, bytes]:
        i, n = self.current()
        return i, keygen_token(self.kcn, home, n, careof=False)

    def careof_token(self, coa) -> tuple[int, bytes]:
        i, n = self.current()
        return i, keygen_token(self.kcn, coa, n, careof=True)

    def kbm_for(self, home, coa, home_index: int, careof_index: int) -> tuple[bytes | None, int]:
        """Kbm from the nonce indices of a BU, or (None, BA status: expired nonce index)."""
        hn = self.nonce(home_index)
        dereg = home == coa
        cn_ = None if dereg else self.nonce(careof_index)
        if hn is None and (cn_ is None and not dereg):
            return None, BA_EXPIRED_NONCES
        if hn is None:
            return None, BA_EXPIRED_HOME_NONCE
        if cn_ is None and not dereg:
            return None, BA_EXPIRED_COA_NONCE
        ht = keygen_token(self.kcn, home, hn, careof=False)
        ct = None if dereg else keygen_token(self.kcn, coa, cn_, careof=True)
        return kbm(ht, ct), 0
