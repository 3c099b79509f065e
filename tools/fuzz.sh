#!/usr/bin/env bash
# libFuzzer harnesses (Swift's -sanitize=fuzzer, with AddressSanitizer) for what the outside world
# reaches: the CDR decoders, the wire frame parser, the MCAP and sqlite3 readers, the pipeline loader.
#
#   tools/fuzz.sh [SECONDS] [HARNESS ...]     default: 5 s each, every harness (cdr wireframe mcap sqlite pipeline)
#
# Each run starts from the seed corpus in tools/fuzz/corpus/NAME and the regression cases in
# tools/fuzz/regressions/NAME (every input that ever crashed a harness: add it there, fix, keep it);
# new coverage goes to .build/fuzz/corpus/NAME. A crash (or leak) leaves its input in .build/fuzz/crash-*,
# never in the directory the script was started from, and fails the run. The module sources are compiled
# here with coverage instrumentation (SwiftPM cannot build a libFuzzer executable beside the normal ones),
# into .build/fuzz.
set -euo pipefail
root="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"  # -P: also when called through a symlink
seconds="${1:-5}"
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=(cdr wireframe mcap sqlite pipeline)
out="$root/.build/fuzz"
mods="$out/modules"
mkdir -p "$mods"
flags=(-sanitize=fuzzer,address -parse-as-library -Onone -g -swift-version 6)
cmods=()
for m in CZeroMQ CYAML CSQLite CZstd CLZ4 CCycloneDDS CSodium; do cmods+=(-I "$root/Sources/$m"); done
libs=(-lzmq -lyaml -lsqlite3 -lzstd -llz4 -lddsc -lsodium -lm)

# The C side of the DDS topic type, and a module map for it.
mkdir -p "$mods/DDSSerializedType"
clang_bin="$(dirname "$(command -v swiftc)")/clang"
"$clang_bin" -c -O1 -DDDS_NDEBUG -I "$root/Sources/DDSSerializedType/include" \
  "$root/Sources/DDSSerializedType/serialized_type.c" -o "$out/serialized_type.o"
cat > "$mods/DDSSerializedType/module.modulemap" <<MAP
module DDSSerializedType {
    header "$root/Sources/DDSSerializedType/include/dds_serialized_type.h"
    export *
}
MAP

rebuilt=0
build_module() {  # NAME [EXTRA.swift ...]: Sources/NAME/**/*.swift (and EXTRA) into libNAME.a and NAME.swiftmodule
  local name="$1" stamp="$out/$1.stamp"
  shift
  local sources
  mapfile -t sources < <(find "$root/Sources/$name" -name '*.swift' | sort)
  sources+=("$@")
  # Up to date when nothing of its own changed and no module before it (in dependency order) was rebuilt.
  local changed
  changed="$(find "$root/Sources/$name" -name '*.swift' -newer "$stamp" 2>/dev/null | head -1 || true)"
  if [ "$rebuilt" = 0 ] && [ -f "$stamp" ] && [ -z "$changed" ]; then return; fi
  rebuilt=1
  echo "fuzz: compiling $name (${#sources[@]} files)" >&2
  swiftc "${flags[@]}" -emit-library -static -emit-module -module-name "$name" \
    -emit-module-path "$mods/$name.swiftmodule" -I "$mods" -I "$mods/DDSSerializedType" "${cmods[@]}" \
    "${sources[@]}" -o "$out/lib$name.a"
  touch "$stamp"
}
# BuildInfo's values come from a file SwiftPM's build plugin writes; here the same tool writes it.
swiftc -O "$root"/Sources/BuildInfoTool/*.swift -o "$out/BuildInfoTool"
"$out/BuildInfoTool" "$root" "$out/BuildInfo.generated.swift"
[ "$out/BuildInfo.generated.swift" -nt "$out/BuildInfo.stamp" ] && rm -f "$out/BuildInfo.stamp"
build_module BuildInfo "$out/BuildInfo.generated.swift"
for m in CompassCore IMUSimulator WireFormat YAML Bags MessageBus ROS2DDS Pipeline; do build_module "$m"; done

# Memory a process keeps on purpose (the parsed-schema cache of KnownInterfaces) is held through
# Swift references whose spare bits LeakSanitizer does not read as pointers: that one allocation site
# is suppressed, every other leak still fails the run.
export LSAN_OPTIONS="suppressions=$root/tools/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
status=0
for h in "${harnesses[@]}"; do
  bin="$out/fuzz-$h"
  swiftc "${flags[@]}" -I "$mods" -I "$mods/DDSSerializedType" "${cmods[@]}" "$root/tools/fuzz/harnesses/$h.swift" \
    "$root"/tools/fuzz/harnesses/shared/*.swift \
    "$out"/libPipeline.a "$out"/libBuildInfo.a "$out"/libROS2DDS.a "$out"/libMessageBus.a "$out"/libBags.a "$out"/libYAML.a \
    "$out"/libWireFormat.a "$out"/libIMUSimulator.a "$out"/libCompassCore.a "$out/serialized_type.o" "${libs[@]}" \
    -o "$bin" 2>"$out/$h-link.log" || { cat "$out/$h-link.log" >&2; exit 1; }  # gold warns about ASan symbols
  corpus="$out/corpus/$h"
  mkdir -p "$corpus" "$root/tools/fuzz/regressions/$h"
  echo "fuzz: $h for ${seconds} s" >&2
  # Regression cases first, each must run clean; then fuzzing from the seeds.
  if compgen -G "$root/tools/fuzz/regressions/$h/*" >/dev/null; then
    "$bin" -runs=0 -artifact_prefix="$out/" "$root/tools/fuzz/regressions/$h" 2>"$out/$h-regressions.log" || {
      echo "fuzz: $h: a regression case crashes again:" >&2; tail -20 "$out/$h-regressions.log" >&2; status=1; continue; }
  fi
  if ! "$bin" -artifact_prefix="$out/" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 "$corpus" "$root/tools/fuzz/corpus/$h" 2>"$out/$h.log"; then
    echo "fuzz: $h found a crash:" >&2; tail -30 "$out/$h.log" >&2; status=1; continue
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$h.log" | grep -o '[0-9]*$' || echo '?')
  cov=$(grep -o 'cov: [0-9]*' "$out/$h.log" | tail -1 | grep -o '[0-9]*' || echo '?')
  echo "fuzz: $h: $runs executions in ${seconds} s, coverage $cov edges, no crash" >&2
done
exit $status
