// The patched prebuilt (scripts/build-udx.sh), not node-gyp-build's lookup: this copy ships one binary only.
module.exports = require('./prebuilds/linux-x64/udx-native.node')
