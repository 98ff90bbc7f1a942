"""Memclave's cryptography: RFC 3526 MODP-2048 Diffie-Hellman, SHA-256, ChaCha20-Poly1305.

Everything goes through the ``cryptography`` package; nothing here is a hand-written cipher.
"""

from __future__ import annotations

import contextlib
import hashlib
import warnings
from collections.abc import Iterator

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric import dh
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.utils import CryptographyDeprecationWarning

#: RFC 3526 §3, the 2048-bit MODP group (generator 2)
MODP_2048_P = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74"
    "020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437"
    "4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF05"
    "98DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB"
    "9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF695581718"
    "3995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF",
    16,
)
MODP_2048_G = 2
#: bytes of a public value or shared secret (big-endian, zero-padded)
DH_BYTES = 256
KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
#: what a DPU encrypts under the new user key to prove the exchange worked
CONFIRMATION = b"Exchange Succeeded Successfully!"


@contextlib.contextmanager
def _ffdh() -> Iterator[None]:
    """Memclave's protocol fixes finite-field Diffie-Hellman (MODP-2048); newer releases of
    ``cryptography`` deprecate FFDH with a warning that users of aiopim cannot act on."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CryptographyDeprecationWarning)
        yield


with _ffdh():
    _GROUP = dh.DHParameterNumbers(MODP_2048_P, MODP_2048_G)


class DhKeyPair:
    """A MODP-2048 key pair from a chosen private exponent (deterministic emulation)."""

    def __init__(self, private_exponent: int) -> None:
        x = private_exponent % (MODP_2048_P - 3) + 2
        y = pow(MODP_2048_G, x, MODP_2048_P)
        with _ffdh():
            self._key = dh.DHPrivateNumbers(x, dh.DHPublicNumbers(y, _GROUP)).private_key()
        self.public = y.to_bytes(DH_BYTES, "big")

    def shared_secret(self, peer_public: bytes) -> bytes | None:
        """``peer^x mod p`` as 256 big-endian bytes; None for an invalid peer value."""
        y = int.from_bytes(peer_public, "big")
        if not 2 <= y <= MODP_2048_P - 2:
            return None
        # g^(xy) depends only on the two public values: the host and the DPU, and runs that
        # repeat a key exchange (tests, explorations of one program), compute it once
        pair = (min(self.public, peer_public), max(self.public, peer_public))
        secret = _SECRETS.get(pair)
        if secret is None:
            try:
                with _ffdh():
                    peer = dh.DHPublicNumbers(y, _GROUP).public_key()
                    secret = self._key.exchange(peer).rjust(DH_BYTES, b"\0")
            except ValueError:
                return None
            if len(_SECRETS) >= _SECRETS_KEPT:
                _SECRETS.clear()
            _SECRETS[pair] = secret
        return secret


#: shared secrets by their two public values (a bounded memo: cleared when full)
_SECRETS: dict[tuple[bytes, bytes], bytes] = {}
_SECRETS_KEPT = 1 << 14


def session_key(shared_secret: bytes, counter: bytes) -> bytes:
    """``k_i = SHA-256(shared secret || counter)``."""
    return hashlib.sha256(shared_secret + counter).digest()


def aead_seal(key: bytes, nonce: bytes, plaintext: bytes, aad: bytes | None = None) -> bytes:
    """ChaCha20-Poly1305 (RFC 8439): ciphertext followed by the 16-byte tag."""
    return ChaCha20Poly1305(key).encrypt(nonce, plaintext, aad or None)


def aead_open(key: bytes, nonce: bytes, sealed: bytes, aad: bytes | None = None) -> bytes | None:
    """The plaintext, or None when the tag does not verify."""
    try:
        return ChaCha20Poly1305(key).decrypt(nonce, sealed, aad or None)
    except InvalidTag:
        return None
