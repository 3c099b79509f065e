// libsodium (Debian's libsodium-dev, the library libzmq's CURVE is built on): SHA-256 for ROS 2 type hashes.
#include <sodium.h>
