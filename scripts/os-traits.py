#!/usr/bin/python3
"""Print the standard trait names of the installed os-traits as JSON, sorted.

src/traits/os-traits.json is this script's output with Debian bookworm's
python3-os-traits (2.9.0, the os-traits of the Ironic 21.4 / nova 26 in
../shared/peers). Regenerate it when moving to a newer OpenStack:
    apt-get install python3-os-traits && scripts/os-traits.py > src/traits/os-traits.json
"""
import json

import os_traits

print(json.dumps({"os_traits_version": getattr(os_traits, "__version__", "unknown"),
                  "traits": sorted(os_traits.get_traits())}, indent=0))
