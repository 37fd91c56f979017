import hashlib

from anatomy_kit.checksums import sha256_of


def test_sha256_of_a_file_read_in_small_chunks_is_the_known_digest(tmp_path):
    f = tmp_path / "abc"
    f.write_bytes(b"abc")
    assert sha256_of(f, chunk=1) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    big = tmp_path / "big"
    payload = bytes(range(256)) * 5000
    big.write_bytes(payload)
    assert sha256_of(big, chunk=4096) == hashlib.sha256(payload).hexdigest()
