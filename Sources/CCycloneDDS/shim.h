// Eclipse Cyclone DDS 0.10 (Debian's cyclonedds-dev), the DDS of ROS 2 Humble and Jazzy's rmw_cyclonedds.
#include <dds/dds.h>
#include <dds/version.h>
