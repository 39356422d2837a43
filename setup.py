"""Package layout; the rest of the build is declared in pyproject.toml.

``schemas/`` and ``topologies/`` stay at the top of the repository (the one copy, the source of
truth) and ship inside the package as ``schedulerstream.schemas`` and
``schedulerstream.topologies``, found at run time through ``importlib.resources``
(schedulerstream/resources.py). Their sub-folders are namespace packages so setuptools ships
their files as package data.
"""

from setuptools import find_namespace_packages, find_packages, setup

# package -> (folder, files it ships)
DATA_PACKAGES = {
    "schedulerstream.schemas": ("schemas", ["*.avsc"]),
    "schedulerstream.topologies": ("topologies", ["*.toml", "*.json"]),
}

packages = find_packages(include=["schedulerstream", "schedulerstream.*"])
package_dir: dict[str, str] = {}
package_data = {"schedulerstream": ["py.typed", "kafka/*-pom.xml", "api/ui/static/*"]}
for name, (folder, patterns) in DATA_PACKAGES.items():
    package_dir[name] = folder
    for sub in ["", *find_namespace_packages(where=folder, exclude=["*__pycache__*"])]:
        package = f"{name}.{sub}" if sub else name
        packages.append(package)
        package_data[package] = patterns

setup(packages=packages, package_dir=package_dir, package_data=package_data)
